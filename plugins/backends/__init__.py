"""Built-in execution backends (hook ``pbf_backends``): ``casadi`` (the CasADi VM with the Python solver
loop, the reference) and ``c`` (generated C for the whole step and rollout, built and cached natively)."""
