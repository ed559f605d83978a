"""DefaultEvictor: every rule about which pods may be evicted (upstream ``plugins/defaultevictor``)."""
