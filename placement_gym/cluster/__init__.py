"""Clusters: devices and links (`Cluster`), the papers' machines (`PRESETS`: data files, read as user
JSON files are), user JSON files, the hardware figures clusters are made of
(`placement_gym.cluster.hardware`), and this machine's own devices for the real-hardware mode
(`placement_gym.cluster.machine`: ``local``, ``cpu<N>``)."""

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.load import ClusterError, cluster_from_dict, cluster_to_dict, load_cluster
from placement_gym.cluster.presets import PRESETS

__all__ = ["Cluster", "ClusterError", "PRESETS", "cluster_from_dict", "cluster_to_dict", "load_cluster"]
