"""URDF importer (placeholder replaced by the io work)."""
def load_urdf(path, floating_base=False):
    raise RuntimeError("load_urdf is being written")
