"""The CDK app: what `cdk deploy` puts into an account (runs at deploy time). `app.py` is the
entry `cdk.json` names; `stack.py` composes the constructs of the other modules."""
