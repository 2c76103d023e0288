"""What a target means on this machine: the host CPU, the resolved target, the self-check kernel."""
