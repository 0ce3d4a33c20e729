"""The canonicalize stage's rewrites: one normal form for equivalent expressions.

Importing this package declares its rewrites on ``opgraph_optimizers.registry.rewrites``
(the plugin hook installs them): arithmetic normal forms in :mod:`.math`, useless and
misplaced DimShuffle/cast/Rebroadcast/fill in :mod:`.elemwise`, useless shape operations in
:mod:`.shape`, a Subtensor of a Subtensor merged into one in :mod:`.subtensor`. :mod:`.utils`
holds the helpers the other rewrite modules share.
"""

from opgraph_optimizers.canonicalize import elemwise, math, shape, subtensor
from opgraph_optimizers.canonicalize.elemwise import *
from opgraph_optimizers.canonicalize.math import *
from opgraph_optimizers.canonicalize.shape import *
from opgraph_optimizers.canonicalize.subtensor import *

__all__ = [*elemwise.__all__, *math.__all__, *shape.__all__, *subtensor.__all__]
