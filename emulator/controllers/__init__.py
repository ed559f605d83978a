"""Control loops: the garbage collector, the disruption controller, and (later) the workload controllers.

Each controller is a plain object with a ``sync_once()`` that does one pass of
reconciliation and returns; tests drive it directly. :mod:`.loop` runs such
objects periodically in a thread. Controllers never import each other (an
import-linter ``independence`` contract in ``pyproject.toml`` checks it): they
cooperate only through the objects in the store, as upstream controllers do.
"""
