"""The Cluster Autoscaler (kubernetes/autoscaler ``cluster-autoscaler/``), laid out as upstream:

* :mod:`.cloudprovider` - the NodeGroup / CloudProvider interface, and :mod:`.cloudprovider.kemu`
  over the emulated cloud (:mod:`emulator.cloud`);
* :mod:`.core` - :mod:`.core.autoscaler` (one scan, ``RunOnce``), :mod:`.core.scaleup`, :mod:`.core.scaledown`;
* :mod:`.estimator.binpacking` - how many nodes of a group the pending pods need;
* :mod:`.simulator` - "does this pod fit there" with the scheduler's own Filter plugins on a snapshot
  (:mod:`.simulator.scheduling`), which pods must move and which block (:mod:`.simulator.drain`);
* :mod:`.expander` - random, most-pods, least-waste, price, priority behind one Strategy;
* :mod:`.clusterstate` - node group health, upcoming nodes, back-off, the status ConfigMap;
* :mod:`.config` (upstream flag names), :mod:`.metrics` (upstream metric names),
  :mod:`.controller` (the controller manager's ``cluster-autoscaler``).

It is a client of the scheduling framework, like the scheduler: it imports the framework,
the in-tree plugins and the scheduler's cache, never the scheduler loop.
"""
