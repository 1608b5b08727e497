"""rlvr_cluster: verl platform and rollout plugins that let one recipe run on GPUs or on CPUs."""
