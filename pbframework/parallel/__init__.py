"""Seed 003's parallel forward dynamics, the machinery under the ``abia``, ``jsiia`` and ``cfa`` plug-ins.

* :mod:`~pbframework.parallel.globalform`: the Lie-group global matrix form of a tree (Eq. 2-4): element
  twists, adjoints, the block bi-diagonal propagation operators, and a long-double reference forward
  dynamics;
* :mod:`~pbframework.parallel.scan`: forward and backward prefix scans of affine steps over the tree's
  depth levels (sequential or in ``ceil(log2 depth)`` parallel levels), and the CasADi kernels on wide
  arrays that run them;
* :mod:`~pbframework.parallel.oddeven`: odd-even elimination of block tridiagonal systems (CFA's
  constraint forces) in ``ceil(log2 n)`` levels.

The forward-dynamics plug-ins themselves are in ``pbframework.plugins.fd``.
"""
