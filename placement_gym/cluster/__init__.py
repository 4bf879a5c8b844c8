"""Clusters: devices and links (`Cluster`), the papers' machines (`PRESETS`) and user JSON files."""

from placement_gym.cluster.cluster import Cluster
from placement_gym.cluster.load import ClusterError, cluster_from_dict, cluster_to_dict, load_cluster
from placement_gym.cluster.presets import PRESETS

__all__ = ["Cluster", "ClusterError", "PRESETS", "cluster_from_dict", "cluster_to_dict", "load_cluster"]
