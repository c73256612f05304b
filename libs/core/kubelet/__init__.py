"""The process runtime's decisions, as kubelet makes them: restarts and back-off, phases from exit codes, the
downward API, devices handed to a pod and a gang's rendezvous. Pure: the node agent does the I/O."""
