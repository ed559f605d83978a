"""Example out-of-tree plugins: small, documented research policies written against the plugin API.

They are registered in the in-tree registry (so a KubeSchedulerConfiguration
can enable them by name) but are not part of any default profile. See
:mod:`emulator.scheduler.plugin_api` for how to write and load your own.
"""
