"""The pipeline on this machine, with no AWS account: the synthesized template stood up in moto,
the functions and state machines run in-process, the parts moto lacks faked (HyperPod, the
Kubernetes API, Prometheus), and the drill that shows it all end to end."""
