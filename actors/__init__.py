"""Ray shells around ``emulator`` objects: the only package that imports Ray (see DESIGN.md, "Layout").

* :mod:`actors.kubelet` - the kubelet shard actor (:class:`emulator.kubelet.shard.KubeletShard`);
* :mod:`actors.launcher` - starts Ray and the kubelet shard actors, restarts and stops them;
* :mod:`actors.controllers` - controller-manager actors;
* :mod:`actors.cli` - the ``kemu`` command (``emulator.cli`` with the kubelet runner injected).
"""
