"""Which instance a HyperPod node is, read from the resource config HyperPod writes on it.

HyperPod writes `/opt/ml/config/resource_config.json` on every node of a cluster (its lifecycle
scripts read it to find the controller). It lists the cluster's instance groups and their
instances, each with its instance id, its name in the cluster and its address in the
customer's VPC:

    {"InstanceGroups": [{"Name": "worker-group-1", "InstanceType": "ml.p5.48xlarge",
      "Instances": [{"InstanceName": "worker-group-1-1", "InstanceId": "i-0a1b…",
                     "CustomerIpAddress": "10.1.69.242", "AgentIpAddress": "172.16.…"}]}]}

A node of a Slurm cluster is named after that address (`ip-10-1-69-242`), so the rank's Slurm
node name finds its entry. Exactly one entry must match: none, or several, leave the rank
unmapped with a warning naming the file and the node; the emitter never picks one of several.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer_emitter.contract import is_instance_id

log = logging.getLogger("trainer_emitter")

RESOURCE_CONFIG_PATH = "/opt/ml/config/resource_config.json"
RESOURCE_CONFIG_VARIABLE = "SDC_RESOURCE_CONFIG"
"""Where to read the resource config instead of `RESOURCE_CONFIG_PATH` (a container that mounts
the node's `/opt/ml/config` elsewhere, or a test)."""

NAME_FIELDS = ("InstanceName",)
"""An instance entry's fields that hold a name the node may go by."""

ADDRESS_FIELDS = ("CustomerIpAddress",)
"""An instance entry's fields that hold its address in the customer's VPC, which names the host
(`10.1.69.242` → `ip-10-1-69-242`). `AgentIpAddress` is HyperPod's own network: no host is
named after it."""


class ForeignFile(ValueError):
    """The file is JSON, but not a resource config as HyperPod writes it."""


def instance_id_from_resource_config(node_name: str | None, path: str | None = None) -> str | None:
    """The instance id of node `node_name` in the resource config at `path` (default
    `RESOURCE_CONFIG_PATH`), or None.

    A missing default file is silent: the node is not a HyperPod node, or the container does not
    see the file. A missing file that `path` names, an unreadable, torn or foreign file, and a node
    that no entry or several entries match each log one warning and give None. Never raises: this
    runs at training start.
    """
    if not node_name or not node_name.strip():
        return None
    file = Path(path or RESOURCE_CONFIG_PATH)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path:
            log.warning(
                "HyperPod resource config %s (%s) does not exist: node %r stays unmapped",
                file,
                RESOURCE_CONFIG_VARIABLE,
                node_name,
            )
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning(
            "HyperPod resource config %s could not be read (%s): node %r stays unmapped",
            file,
            exc,
            node_name,
        )
        return None
    try:
        instances = list(_instances(json.loads(text)))
    except (ValueError, RecursionError) as exc:  # torn (json.JSONDecodeError) or foreign
        log.warning(
            "%s is not a HyperPod resource config (%s): node %r stays unmapped",
            file,
            exc,
            node_name,
        )
        return None
    return _the_one_match(node_name.strip(), instances, file)


def host_name_of_address(address: str) -> str:
    """The host name EC2 gives an address in a VPC, as Slurm on HyperPod names its nodes:
    `10.1.69.242` → `ip-10-1-69-242`."""
    return "ip-" + address.strip().replace(".", "-")


def names_of(entry: dict[str, Any]) -> set[str]:
    """Every name an instance entry may go by, lowercase: its `NAME_FIELDS` and the host names of
    its `ADDRESS_FIELDS`."""
    names = [entry.get(field) for field in NAME_FIELDS]
    names += [
        host_name_of_address(address)
        for field in ADDRESS_FIELDS
        if isinstance(address := entry.get(field), str) and address.strip()
    ]
    return {name.strip().lower() for name in names if isinstance(name, str) and name.strip()}


def _instances(config: Any) -> Iterator[dict[str, Any]]:
    """Every instance entry of every instance group; ForeignFile at the first part that is not
    shaped as HyperPod writes it."""
    if not isinstance(config, dict):
        raise ForeignFile(f"the top level is a {type(config).__name__}, not an object")
    groups = config.get("InstanceGroups")
    if not isinstance(groups, list):
        raise ForeignFile("it has no 'InstanceGroups' list")
    for g, group in enumerate(groups):
        instances = group.get("Instances") if isinstance(group, dict) else None
        if not isinstance(instances, list):
            raise ForeignFile(f"InstanceGroups[{g}] has no 'Instances' list")
        for i, instance in enumerate(instances):
            if not isinstance(instance, dict):
                raise ForeignFile(f"InstanceGroups[{g}].Instances[{i}] is not an object")
            yield instance


def _the_one_match(node_name: str, instances: list[dict[str, Any]], file: Path) -> str | None:
    wanted = {node_name.lower(), node_name.split(".", 1)[0].lower()}
    matches = [entry for entry in instances if names_of(entry) & wanted]
    if not matches:
        log.warning(
            "node %r is not in HyperPod resource config %s (%d instances, matched by %s or "
            "ip-<%s>): it stays unmapped",
            node_name,
            file,
            len(instances),
            "/".join(NAME_FIELDS),
            "/".join(ADDRESS_FIELDS),
        )
        return None
    if len(matches) > 1:
        log.warning(
            "node %r matches %d entries of HyperPod resource config %s (instance ids %s): it "
            "stays unmapped rather than take one of them",
            node_name,
            len(matches),
            file,
            ", ".join(repr(entry.get("InstanceId")) for entry in matches),
        )
        return None
    instance_id = matches[0].get("InstanceId")
    if not is_instance_id(instance_id):
        log.warning(
            "node %r's entry in HyperPod resource config %s has InstanceId %r, which is not an "
            "instance id: it stays unmapped",
            node_name,
            file,
            instance_id,
        )
        return None
    return str(instance_id)
