"""The demo agent (``python -m acp_kernel.demo.agent``) and the demo CLI for
passthrough (``python -m acp_kernel.demo.cli``): scripted, no model, no key."""
