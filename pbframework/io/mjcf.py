def load_mjcf(path):
    raise RuntimeError("load_mjcf is being written")
