"""Where jobs run: the GPU inventory (NVML, simulated, Ray), the launchers that start a job's
sidecar (here, through the user's own server, over Ray), and the agent that does it for a
shared scheduler."""
