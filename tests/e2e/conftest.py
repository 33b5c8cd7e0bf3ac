from __future__ import annotations

import os

# jsii prints an end-of-life banner for the machine's Node 20 on every synth.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
