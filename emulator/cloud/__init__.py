"""The emulated cloud: node groups and instances in Redis, the machines a cloud provider would sell.

:mod:`.nodegroups` declares groups (min, max, instance type, price, boot delay,
failures, quota); :mod:`.provider` keeps their instances in Redis. The Cluster
Autoscaler grows and shrinks them (:mod:`emulator.clusterautoscaler`); kubelet
shards boot and terminate them (:mod:`emulator.kubelet.cloudnodes`).
"""
