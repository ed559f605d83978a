"""The protobuf schema of every message kemu decodes: field numbers, types and JSON names.

Upstream these are the ``generated.proto`` files beside each group's ``types.go``.
:data:`SCHEMA` maps each message name to a compact field list written from the field
numbers, types and JSON names of the upstream messages (``k8s.io/api`` ``core/v1``,
``apps/v1``, ``policy/v1``, ``scheduling/v1``, ``coordination/v1``, ``node/v1``,
``autoscaling/v1``, ``discovery/v1`` and ``storage/v1`` ``generated.proto`` + ``types.go``; apimachinery
``pkg/apis/meta/v1``, ``pkg/api/resource``, ``pkg/util/intstr``; all at v0.32, the API level
kemu emulates). It covers every message reachable from the kinds kemu serves and the subresource bodies it takes
(Binding, Eviction, Scale, DeleteOptions). One entry per message, fields in Go struct order
(the order of the JSON keys), each ``NUMBER JSONNAME TYPE``:

* ``TYPE`` is a scalar (``str``, ``bytes`` (base64 in JSON), ``bool``, ``i32``, ``i64``;
  ``raw`` keeps the bytes for a converter) or a message name; ``[]T`` is repeated, ``{T}``
  is ``map<string, T>``;
* ``!`` after a scalar keeps its zero value. Kubernetes' protos are proto2 and gogo writes
  every non-pointer field, zero or not, so presence on the wire says nothing; what decides
  is the Go JSON encoding: a zero is omitted for ``omitempty`` value fields and kept for
  pointers (written only when set) and for fields without ``omitempty``;
* ``...`` as the JSON name inlines the sub-message's fields (Go's ``json:",inline"``:
  ``Volume.volumeSource``, ``Probe.handler``, ``localObjectReference``...).

The decoder that reads this table is :mod:`emulator.apiserver.protobuf`.
"""

from __future__ import annotations

__all__ = ["SCHEMA", "TOP_LEVEL"]

# Container and EphemeralContainerCommon carry the same fields under the same numbers (generated.proto).
_CONTAINER_FIELDS = (
    "1 name str!, 2 image str, 3 command []str, 4 args []str, 5 workingDir str, 6 ports []ContainerPort, "
    "19 envFrom []EnvFromSource, 7 env []EnvVar, 8 resources ResourceRequirements, "
    "23 resizePolicy []ContainerResizePolicy, 24 restartPolicy str!, 9 volumeMounts []VolumeMount, "
    "21 volumeDevices []VolumeDevice, 10 livenessProbe Probe, 11 readinessProbe Probe, 22 startupProbe Probe, "
    "12 lifecycle Lifecycle, 13 terminationMessagePath str, 20 terminationMessagePolicy str, "
    "14 imagePullPolicy str, 15 securityContext SecurityContext, 16 stdin bool, 17 stdinOnce bool, 18 tty bool")

SCHEMA: dict[str, str] = {
    # runtime (apimachinery pkg/runtime/generated.proto): the envelope
    "Unknown": "1 typeMeta TypeMeta, 2 raw raw!, 3 contentEncoding str, 4 contentType str",
    "TypeMeta": "1 apiVersion str, 2 kind str",
    # Messages with a non-object JSON form, converted by protobuf._CONVERTERS: meta/v1 Time and MicroTime
    # (a Timestamp), resource.Quantity (pkg/api/resource), intstr.IntOrString, meta/v1 FieldsV1 and
    # runtime.RawExtension (both raw JSON).
    "Time": "1 seconds i64!, 2 nanos i32!",
    "MicroTime": "1 seconds i64!, 2 nanos i32!",
    "Quantity": "1 string str!",
    "IntOrString": "1 type i64!, 2 intVal i32!, 3 strVal str!",
    "FieldsV1": "1 Raw raw!",
    # meta/v1: apimachinery pkg/apis/meta/v1/generated.proto
    "ObjectMeta": (
        "1 name str, 2 generateName str, 3 namespace str, 4 selfLink str, 5 uid str, 6 resourceVersion str, "
        "7 generation i64, 8 creationTimestamp Time, 9 deletionTimestamp Time, 10 deletionGracePeriodSeconds i64!, "
        "11 labels {str}, 12 annotations {str}, 13 ownerReferences []OwnerReference, 14 finalizers []str, "
        "17 managedFields []ManagedFieldsEntry"),
    "OwnerReference": (
        "5 apiVersion str!, 1 kind str!, 3 name str!, 4 uid str!, 6 controller bool!, 7 blockOwnerDeletion bool!"),
    "ManagedFieldsEntry": (
        "1 manager str, 2 operation str, 3 apiVersion str, 4 time Time, 6 fieldsType str, 7 fieldsV1 FieldsV1, "
        "8 subresource str"),
    "LabelSelector": "1 matchLabels {str}, 2 matchExpressions []LabelSelectorRequirement",
    "LabelSelectorRequirement": "1 key str!, 2 operator str!, 3 values []str",
    "Condition": (
        "1 type str!, 2 status str!, 3 observedGeneration i64, 4 lastTransitionTime Time, 5 reason str!, "
        "6 message str!"),
    "DeleteOptions": (
        "1 gracePeriodSeconds i64!, 2 preconditions Preconditions, 3 orphanDependents bool!, 4 propagationPolicy str!, "
        "5 dryRun []str, 6 ignoreStoreReadErrorWithClusterBreakingPotential bool!"),
    "Preconditions": "1 uid str!, 2 resourceVersion str!",
    # core/v1 (api core/v1/generated.proto): objects other than pods and nodes
    "Namespace": "1 metadata ObjectMeta, 2 spec NamespaceSpec, 3 status NamespaceStatus",
    "NamespaceSpec": "1 finalizers []str",
    "NamespaceStatus": "1 phase str, 2 conditions []NamespaceCondition",
    "NamespaceCondition": "1 type str!, 2 status str!, 4 lastTransitionTime Time, 5 reason str, 6 message str",
    "ConfigMap": "1 metadata ObjectMeta, 4 immutable bool!, 2 data {str}, 3 binaryData {bytes}",
    "LimitRange": "1 metadata ObjectMeta, 2 spec LimitRangeSpec",
    "LimitRangeSpec": "1 limits []LimitRangeItem",
    "LimitRangeItem": (
        "1 type str!, 2 max {Quantity}, 3 min {Quantity}, 4 default {Quantity}, 5 defaultRequest {Quantity}, "
        "6 maxLimitRequestRatio {Quantity}"),
    "Event": (
        "1 metadata ObjectMeta, 2 involvedObject ObjectReference, 3 reason str, 4 message str, 5 source EventSource, "
        "6 firstTimestamp Time, 7 lastTimestamp Time, 8 count i32, 9 type str, 10 eventTime MicroTime, "
        "11 series EventSeries, 12 action str, 13 related ObjectReference, 14 reportingComponent str!, "
        "15 reportingInstance str!"),
    "EventSource": "1 component str, 2 host str",
    "EventSeries": "1 count i32, 2 lastObservedTime MicroTime",
    "ObjectReference": (
        "1 kind str, 2 namespace str, 3 name str, 4 uid str, 5 apiVersion str, 6 resourceVersion str, 7 fieldPath str"),
    "Binding": "1 metadata ObjectMeta, 2 target ObjectReference",
    "ResourceQuota": "1 metadata ObjectMeta, 2 spec ResourceQuotaSpec, 3 status ResourceQuotaStatus",
    "ResourceQuotaSpec": "1 hard {Quantity}, 2 scopes []str, 3 scopeSelector ScopeSelector",
    "ResourceQuotaStatus": "1 hard {Quantity}, 2 used {Quantity}",
    "ScopeSelector": "1 matchExpressions []ScopedResourceSelectorRequirement",
    "ScopedResourceSelectorRequirement": "1 scopeName str!, 2 operator str!, 3 values []str",
    # core/v1: pods and their templates
    "Pod": "1 metadata ObjectMeta, 2 spec PodSpec, 3 status PodStatus",
    "PodTemplateSpec": "1 metadata ObjectMeta, 2 spec PodSpec",
    "PodSpec": (
        "1 volumes []Volume, 20 initContainers []Container, 2 containers []Container, "
        "34 ephemeralContainers []EphemeralContainer, 3 restartPolicy str, 4 terminationGracePeriodSeconds i64!, "
        "5 activeDeadlineSeconds i64!, 6 dnsPolicy str, 7 nodeSelector {str}, 8 serviceAccountName str, "
        "9 serviceAccount str, 21 automountServiceAccountToken bool!, 10 nodeName str, 11 hostNetwork bool, "
        "12 hostPID bool, 13 hostIPC bool, 27 shareProcessNamespace bool!, 14 securityContext PodSecurityContext, "
        "15 imagePullSecrets []LocalObjectReference, 16 hostname str, 17 subdomain str, 18 affinity Affinity, "
        "19 schedulerName str, 22 tolerations []Toleration, 23 hostAliases []HostAlias, 24 priorityClassName str, "
        "25 priority i32!, 26 dnsConfig PodDNSConfig, 28 readinessGates []PodReadinessGate, 29 runtimeClassName str!, "
        "30 enableServiceLinks bool!, 31 preemptionPolicy str!, 32 overhead {Quantity}, "
        "33 topologySpreadConstraints []TopologySpreadConstraint, 35 setHostnameAsFQDN bool!, 36 os PodOS, "
        "37 hostUsers bool!, 38 schedulingGates []PodSchedulingGate, 39 resourceClaims []PodResourceClaim, "
        "40 resources ResourceRequirements"),
    "Container": _CONTAINER_FIELDS,
    "EphemeralContainer": "1 ... EphemeralContainerCommon, 2 targetContainerName str",
    "PodSecurityContext": (
        "1 seLinuxOptions SELinuxOptions, 8 windowsOptions WindowsSecurityContextOptions, 2 runAsUser i64!, "
        "6 runAsGroup i64!, 3 runAsNonRoot bool!, 4 supplementalGroups []i64, 12 supplementalGroupsPolicy str!, "
        "5 fsGroup i64!, 7 sysctls []Sysctl, 9 fsGroupChangePolicy str!, 10 seccompProfile SeccompProfile, "
        "11 appArmorProfile AppArmorProfile, 13 seLinuxChangePolicy str!"),
    "LocalObjectReference": "1 name str",
    "Affinity": "1 nodeAffinity NodeAffinity, 2 podAffinity PodAffinity, 3 podAntiAffinity PodAntiAffinity",
    "Toleration": "1 key str, 2 operator str, 3 value str, 4 effect str, 5 tolerationSeconds i64!",
    "HostAlias": "1 ip str!, 2 hostnames []str",
    "PodDNSConfig": "1 nameservers []str, 2 searches []str, 3 options []PodDNSConfigOption",
    "PodReadinessGate": "1 conditionType str!",
    "TopologySpreadConstraint": (
        "1 maxSkew i32!, 2 topologyKey str!, 3 whenUnsatisfiable str!, 4 labelSelector LabelSelector, "
        "5 minDomains i32!, 6 nodeAffinityPolicy str!, 7 nodeTaintsPolicy str!, 8 matchLabelKeys []str"),
    "PodOS": "1 name str!",
    "PodSchedulingGate": "1 name str!",
    "PodResourceClaim": "1 name str!, 3 resourceClaimName str!, 4 resourceClaimTemplateName str!",
    "ResourceRequirements": "1 limits {Quantity}, 2 requests {Quantity}, 3 claims []ResourceClaim",
    "ContainerPort": "1 name str, 2 hostPort i32, 3 containerPort i32!, 4 protocol str, 5 hostIP str",
    "EnvFromSource": "1 prefix str, 2 configMapRef ConfigMapEnvSource, 3 secretRef SecretEnvSource",
    "EnvVar": "1 name str!, 2 value str, 3 valueFrom EnvVarSource",
    "ContainerResizePolicy": "1 resourceName str!, 2 restartPolicy str!",
    "VolumeMount": (
        "1 name str!, 2 readOnly bool, 7 recursiveReadOnly str!, 3 mountPath str!, 4 subPath str, "
        "5 mountPropagation str!, 6 subPathExpr str"),
    "VolumeDevice": "1 name str!, 2 devicePath str!",
    "Probe": (
        "1 ... ProbeHandler, 2 initialDelaySeconds i32, 3 timeoutSeconds i32, 4 periodSeconds i32, "
        "5 successThreshold i32, 6 failureThreshold i32, 7 terminationGracePeriodSeconds i64!"),
    "Lifecycle": "1 postStart LifecycleHandler, 2 preStop LifecycleHandler",
    "SecurityContext": (
        "1 capabilities Capabilities, 2 privileged bool!, 3 seLinuxOptions SELinuxOptions, "
        "10 windowsOptions WindowsSecurityContextOptions, 4 runAsUser i64!, 8 runAsGroup i64!, 5 runAsNonRoot bool!, "
        "6 readOnlyRootFilesystem bool!, 7 allowPrivilegeEscalation bool!, 9 procMount str!, "
        "11 seccompProfile SeccompProfile, 12 appArmorProfile AppArmorProfile"),
    "EphemeralContainerCommon": _CONTAINER_FIELDS,
    "SELinuxOptions": "1 user str, 2 role str, 3 type str, 4 level str",
    "WindowsSecurityContextOptions": (
        "1 gmsaCredentialSpecName str!, 2 gmsaCredentialSpec str!, 3 runAsUserName str!, 4 hostProcess bool!"),
    "Sysctl": "1 name str!, 2 value str!",
    "SeccompProfile": "1 type str!, 2 localhostProfile str!",
    "AppArmorProfile": "1 type str!, 2 localhostProfile str!",
    "NodeAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector, "
        "2 preferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm"),
    "PodAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm, "
        "2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm"),
    "PodAntiAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution []PodAffinityTerm, "
        "2 preferredDuringSchedulingIgnoredDuringExecution []WeightedPodAffinityTerm"),
    "PodDNSConfigOption": "1 name str, 2 value str!",
    "ResourceClaim": "1 name str!, 2 request str",
    "NodeSelector": "1 nodeSelectorTerms []NodeSelectorTerm",
    "ConfigMapEnvSource": "1 ... LocalObjectReference, 2 optional bool!",
    "SecretEnvSource": "1 ... LocalObjectReference, 2 optional bool!",
    "EnvVarSource": (
        "1 fieldRef ObjectFieldSelector, 2 resourceFieldRef ResourceFieldSelector, "
        "3 configMapKeyRef ConfigMapKeySelector, 4 secretKeyRef SecretKeySelector"),
    "ProbeHandler": "1 exec ExecAction, 2 httpGet HTTPGetAction, 3 tcpSocket TCPSocketAction, 4 grpc GRPCAction",
    "LifecycleHandler": "1 exec ExecAction, 2 httpGet HTTPGetAction, 3 tcpSocket TCPSocketAction, 4 sleep SleepAction",
    "Capabilities": "1 add []str, 2 drop []str",
    "PreferredSchedulingTerm": "1 weight i32!, 2 preference NodeSelectorTerm",
    "PodAffinityTerm": (
        "1 labelSelector LabelSelector, 2 namespaces []str, 3 topologyKey str!, 4 namespaceSelector LabelSelector, "
        "5 matchLabelKeys []str, 6 mismatchLabelKeys []str"),
    "WeightedPodAffinityTerm": "1 weight i32!, 2 podAffinityTerm PodAffinityTerm",
    "NodeSelectorTerm": "1 matchExpressions []NodeSelectorRequirement, 2 matchFields []NodeSelectorRequirement",
    "ObjectFieldSelector": "1 apiVersion str, 2 fieldPath str!",
    "ResourceFieldSelector": "1 containerName str, 2 resource str!, 3 divisor Quantity",
    "ConfigMapKeySelector": "1 ... LocalObjectReference, 2 key str!, 3 optional bool!",
    "SecretKeySelector": "1 ... LocalObjectReference, 2 key str!, 3 optional bool!",
    "ExecAction": "1 command []str",
    "HTTPGetAction": "1 path str, 2 port IntOrString, 3 host str, 4 scheme str, 5 httpHeaders []HTTPHeader",
    "TCPSocketAction": "1 port IntOrString, 2 host str",
    "GRPCAction": "1 port i32!, 2 service str!",
    "SleepAction": "1 seconds i64!",
    "NodeSelectorRequirement": "1 key str!, 2 operator str!, 3 values []str",
    "HTTPHeader": "1 name str!, 2 value str!",
    # core/v1: volumes
    "PersistentVolumeClaimSpec": (
        "1 accessModes []str, 4 selector LabelSelector, 2 resources VolumeResourceRequirements, 3 volumeName str, "
        "5 storageClassName str!, 6 volumeMode str!, 7 dataSource TypedLocalObjectReference, "
        "8 dataSourceRef TypedObjectReference, 9 volumeAttributesClassName str!"),
    "Volume": "1 name str!, 2 ... VolumeSource",
    "VolumeResourceRequirements": "1 limits {Quantity}, 2 requests {Quantity}",
    "TypedLocalObjectReference": "1 apiGroup str!, 2 kind str!, 3 name str!",
    "TypedObjectReference": "1 apiGroup str!, 2 kind str!, 3 name str!, 4 namespace str!",
    "VolumeSource": (
        "1 hostPath HostPathVolumeSource, 2 emptyDir EmptyDirVolumeSource, "
        "3 gcePersistentDisk GCEPersistentDiskVolumeSource, 4 awsElasticBlockStore AWSElasticBlockStoreVolumeSource, "
        "5 gitRepo GitRepoVolumeSource, 6 secret SecretVolumeSource, 7 nfs NFSVolumeSource, 8 iscsi ISCSIVolumeSource, "
        "9 glusterfs GlusterfsVolumeSource, 10 persistentVolumeClaim PersistentVolumeClaimVolumeSource, "
        "11 rbd RBDVolumeSource, 12 flexVolume FlexVolumeSource, 13 cinder CinderVolumeSource, "
        "14 cephfs CephFSVolumeSource, 15 flocker FlockerVolumeSource, 16 downwardAPI DownwardAPIVolumeSource, "
        "17 fc FCVolumeSource, 18 azureFile AzureFileVolumeSource, 19 configMap ConfigMapVolumeSource, "
        "20 vsphereVolume VsphereVirtualDiskVolumeSource, 21 quobyte QuobyteVolumeSource, "
        "22 azureDisk AzureDiskVolumeSource, 23 photonPersistentDisk PhotonPersistentDiskVolumeSource, "
        "26 projected ProjectedVolumeSource, 24 portworxVolume PortworxVolumeSource, 25 scaleIO ScaleIOVolumeSource, "
        "27 storageos StorageOSVolumeSource, 28 csi CSIVolumeSource, 29 ephemeral EphemeralVolumeSource, "
        "30 image ImageVolumeSource"),
    "GCEPersistentDiskVolumeSource": "1 pdName str!, 2 fsType str, 3 partition i32, 4 readOnly bool",
    "AWSElasticBlockStoreVolumeSource": "1 volumeID str!, 2 fsType str, 3 partition i32, 4 readOnly bool",
    "HostPathVolumeSource": "1 path str!, 2 type str!",
    "NFSVolumeSource": "1 server str!, 2 path str!, 3 readOnly bool",
    "FCVolumeSource": "1 targetWWNs []str, 2 lun i32!, 3 fsType str, 4 readOnly bool, 5 wwids []str",
    "FlockerVolumeSource": "1 datasetName str, 2 datasetUUID str",
    "VsphereVirtualDiskVolumeSource": "1 volumePath str!, 2 fsType str, 3 storagePolicyName str, 4 storagePolicyID str",
    "QuobyteVolumeSource": "1 registry str!, 2 volume str!, 3 readOnly bool, 4 user str, 5 group str, 6 tenant str",
    "AzureDiskVolumeSource": (
        "1 diskName str!, 2 diskURI str!, 3 cachingMode str!, 4 fsType str!, 5 readOnly bool!, 6 kind str!"),
    "PhotonPersistentDiskVolumeSource": "1 pdID str!, 2 fsType str",
    "PortworxVolumeSource": "1 volumeID str!, 2 fsType str, 3 readOnly bool",
    "EmptyDirVolumeSource": "1 medium str, 2 sizeLimit Quantity",
    "GitRepoVolumeSource": "1 repository str!, 2 revision str, 3 directory str",
    "SecretVolumeSource": "1 secretName str, 2 items []KeyToPath, 3 defaultMode i32!, 4 optional bool!",
    "ISCSIVolumeSource": (
        "1 targetPortal str!, 2 iqn str!, 3 lun i32!, 4 iscsiInterface str, 5 fsType str, 6 readOnly bool, "
        "7 portals []str, 8 chapAuthDiscovery bool, 11 chapAuthSession bool, 10 secretRef LocalObjectReference, "
        "12 initiatorName str!"),
    "GlusterfsVolumeSource": "1 endpoints str!, 2 path str!, 3 readOnly bool",
    "PersistentVolumeClaimVolumeSource": "1 claimName str!, 2 readOnly bool",
    "RBDVolumeSource": (
        "1 monitors []str, 2 image str!, 3 fsType str, 4 pool str, 5 user str, 6 keyring str, "
        "7 secretRef LocalObjectReference, 8 readOnly bool"),
    "FlexVolumeSource": (
        "1 driver str!, 2 fsType str, 3 secretRef LocalObjectReference, 4 readOnly bool, 5 options {str}"),
    "CinderVolumeSource": "1 volumeID str!, 2 fsType str, 3 readOnly bool, 4 secretRef LocalObjectReference",
    "CephFSVolumeSource": (
        "1 monitors []str, 2 path str, 3 user str, 4 secretFile str, 5 secretRef LocalObjectReference, "
        "6 readOnly bool"),
    "DownwardAPIVolumeSource": "1 items []DownwardAPIVolumeFile, 2 defaultMode i32!",
    "AzureFileVolumeSource": "1 secretName str!, 2 shareName str!, 3 readOnly bool",
    "ConfigMapVolumeSource": "1 ... LocalObjectReference, 2 items []KeyToPath, 3 defaultMode i32!, 4 optional bool!",
    "ProjectedVolumeSource": "1 sources []VolumeProjection, 2 defaultMode i32!",
    "ScaleIOVolumeSource": (
        "1 gateway str!, 2 system str!, 3 secretRef LocalObjectReference, 4 sslEnabled bool, 5 protectionDomain str, "
        "6 storagePool str, 7 storageMode str, 8 volumeName str, 9 fsType str, 10 readOnly bool"),
    "StorageOSVolumeSource": (
        "1 volumeName str, 2 volumeNamespace str, 3 fsType str, 4 readOnly bool, 5 secretRef LocalObjectReference"),
    "CSIVolumeSource": (
        "1 driver str!, 2 readOnly bool!, 3 fsType str!, 4 volumeAttributes {str}, "
        "5 nodePublishSecretRef LocalObjectReference"),
    "EphemeralVolumeSource": "1 volumeClaimTemplate PersistentVolumeClaimTemplate",
    "ImageVolumeSource": "1 reference str, 2 pullPolicy str",
    "KeyToPath": "1 key str!, 2 path str!, 3 mode i32!",
    "DownwardAPIVolumeFile": (
        "1 path str!, 2 fieldRef ObjectFieldSelector, 3 resourceFieldRef ResourceFieldSelector, 4 mode i32!"),
    "VolumeProjection": (
        "1 secret SecretProjection, 2 downwardAPI DownwardAPIProjection, 3 configMap ConfigMapProjection, "
        "4 serviceAccountToken ServiceAccountTokenProjection, 5 clusterTrustBundle ClusterTrustBundleProjection"),
    "PersistentVolumeClaimTemplate": "1 metadata ObjectMeta, 2 spec PersistentVolumeClaimSpec",
    "SecretProjection": "1 ... LocalObjectReference, 2 items []KeyToPath, 4 optional bool!",
    "DownwardAPIProjection": "1 items []DownwardAPIVolumeFile",
    "ConfigMapProjection": "1 ... LocalObjectReference, 2 items []KeyToPath, 4 optional bool!",
    "ServiceAccountTokenProjection": "1 audience str, 2 expirationSeconds i64!, 3 path str!",
    "ClusterTrustBundleProjection": (
        "1 name str!, 2 signerName str!, 3 labelSelector LabelSelector, 5 optional bool!, 4 path str!"),
    # core/v1: pod status
    "PodStatus": (
        "1 phase str, 2 conditions []PodCondition, 3 message str, 4 reason str, 11 nominatedNodeName str, "
        "5 hostIP str, 16 hostIPs []HostIP, 6 podIP str, 12 podIPs []PodIP, 7 startTime Time, "
        "10 initContainerStatuses []ContainerStatus, 8 containerStatuses []ContainerStatus, 9 qosClass str, "
        "13 ephemeralContainerStatuses []ContainerStatus, 14 resize str, "
        "15 resourceClaimStatuses []PodResourceClaimStatus"),
    "PodCondition": (
        "1 type str!, 2 status str!, 3 lastProbeTime Time, 4 lastTransitionTime Time, 5 reason str, 6 message str"),
    "HostIP": "1 ip str!",
    "PodIP": "1 ip str!",
    "ContainerStatus": (
        "1 name str!, 2 state ContainerState, 3 lastState ContainerState, 4 ready bool!, 5 restartCount i32!, "
        "6 image str!, 7 imageID str!, 8 containerID str, 9 started bool!, 10 allocatedResources {Quantity}, "
        "11 resources ResourceRequirements, 12 volumeMounts []VolumeMountStatus, 13 user ContainerUser, "
        "14 allocatedResourcesStatus []ResourceStatus"),
    "PodResourceClaimStatus": "1 name str!, 2 resourceClaimName str!",
    "ContainerState": (
        "1 waiting ContainerStateWaiting, 2 running ContainerStateRunning, 3 terminated ContainerStateTerminated"),
    "VolumeMountStatus": "1 name str!, 2 mountPath str!, 3 readOnly bool, 4 recursiveReadOnly str!",
    "ContainerUser": "1 linux LinuxContainerUser",
    "ResourceStatus": "1 name str!, 2 resources []ResourceHealth",
    "ContainerStateWaiting": "1 reason str, 2 message str",
    "ContainerStateRunning": "1 startedAt Time",
    "ContainerStateTerminated": (
        "1 exitCode i32!, 2 signal i32, 3 reason str, 4 message str, 5 startedAt Time, 6 finishedAt Time, "
        "7 containerID str"),
    "LinuxContainerUser": "1 uid i64!, 2 gid i64!, 3 supplementalGroups []i64",
    "ResourceHealth": "1 resourceID str!, 2 health str",
    # core/v1: nodes
    "Node": "1 metadata ObjectMeta, 2 spec NodeSpec, 3 status NodeStatus",
    "NodeSpec": (
        "1 podCIDR str, 7 podCIDRs []str, 3 providerID str, 4 unschedulable bool, 5 taints []Taint, "
        "6 configSource NodeConfigSource, 2 externalID str"),
    "NodeStatus": (
        "1 capacity {Quantity}, 2 allocatable {Quantity}, 3 phase str, 4 conditions []NodeCondition, "
        "5 addresses []NodeAddress, 6 daemonEndpoints NodeDaemonEndpoints, 7 nodeInfo NodeSystemInfo, "
        "8 images []ContainerImage, 9 volumesInUse []str, 10 volumesAttached []AttachedVolume, "
        "11 config NodeConfigStatus, 12 runtimeHandlers []NodeRuntimeHandler, 13 features NodeFeatures"),
    "Taint": "1 key str!, 2 value str, 3 effect str!, 4 timeAdded Time",
    "NodeConfigSource": "2 configMap ConfigMapNodeConfigSource",
    "NodeCondition": (
        "1 type str!, 2 status str!, 3 lastHeartbeatTime Time, 4 lastTransitionTime Time, 5 reason str, 6 message str"),
    "NodeAddress": "1 type str!, 2 address str!",
    "NodeDaemonEndpoints": "1 kubeletEndpoint DaemonEndpoint",
    "NodeSystemInfo": (
        "1 machineID str!, 2 systemUUID str!, 3 bootID str!, 4 kernelVersion str!, 5 osImage str!, "
        "6 containerRuntimeVersion str!, 7 kubeletVersion str!, 8 kubeProxyVersion str!, 9 operatingSystem str!, "
        "10 architecture str!"),
    "ContainerImage": "1 names []str, 2 sizeBytes i64",
    "AttachedVolume": "1 name str!, 2 devicePath str!",
    "NodeConfigStatus": (
        "1 assigned NodeConfigSource, 2 active NodeConfigSource, 3 lastKnownGood NodeConfigSource, 4 error str"),
    "NodeRuntimeHandler": "1 name str!, 2 features NodeRuntimeHandlerFeatures",
    "NodeFeatures": "1 supplementalGroupsPolicy bool!",
    "ConfigMapNodeConfigSource": (
        "1 namespace str!, 2 name str!, 3 uid str, 4 resourceVersion str, 5 kubeletConfigKey str!"),
    "DaemonEndpoint": "1 Port i32!",
    "NodeRuntimeHandlerFeatures": "1 recursiveReadOnlyMounts bool!, 2 userNamespaces bool!",
    # core/v1: persistent volumes and claims (PersistentVolumeClaimSpec is with the pod volumes)
    "PersistentVolume": "1 metadata ObjectMeta, 2 spec PersistentVolumeSpec, 3 status PersistentVolumeStatus",
    "PersistentVolumeClaim": (
        "1 metadata ObjectMeta, 2 spec PersistentVolumeClaimSpec, 3 status PersistentVolumeClaimStatus"),
    "PersistentVolumeSpec": (
        "1 capacity {Quantity}, 2 ... PersistentVolumeSource, 3 accessModes []str, 4 claimRef ObjectReference, "
        "5 persistentVolumeReclaimPolicy str, 6 storageClassName str, 7 mountOptions []str, 8 volumeMode str!, "
        "9 nodeAffinity VolumeNodeAffinity, 10 volumeAttributesClassName str!"),
    "PersistentVolumeStatus": "1 phase str, 2 message str, 3 reason str, 4 lastPhaseTransitionTime Time",
    "PersistentVolumeClaimStatus": (
        "1 phase str, 2 accessModes []str, 3 capacity {Quantity}, 4 conditions []PersistentVolumeClaimCondition, "
        "5 allocatedResources {Quantity}, 7 allocatedResourceStatuses {str}, 8 currentVolumeAttributesClassName str!, "
        "9 modifyVolumeStatus ModifyVolumeStatus"),
    "TopologySelectorTerm": "1 matchLabelExpressions []TopologySelectorLabelRequirement",
    "PersistentVolumeSource": (
        "1 gcePersistentDisk GCEPersistentDiskVolumeSource, 2 awsElasticBlockStore AWSElasticBlockStoreVolumeSource, "
        "3 hostPath HostPathVolumeSource, 4 glusterfs GlusterfsPersistentVolumeSource, 5 nfs NFSVolumeSource, "
        "6 rbd RBDPersistentVolumeSource, 7 iscsi ISCSIPersistentVolumeSource, 8 cinder CinderPersistentVolumeSource, "
        "9 cephfs CephFSPersistentVolumeSource, 10 fc FCVolumeSource, 11 flocker FlockerVolumeSource, "
        "12 flexVolume FlexPersistentVolumeSource, 13 azureFile AzureFilePersistentVolumeSource, "
        "14 vsphereVolume VsphereVirtualDiskVolumeSource, 15 quobyte QuobyteVolumeSource, "
        "16 azureDisk AzureDiskVolumeSource, 17 photonPersistentDisk PhotonPersistentDiskVolumeSource, "
        "18 portworxVolume PortworxVolumeSource, 19 scaleIO ScaleIOPersistentVolumeSource, 20 local LocalVolumeSource, "
        "21 storageos StorageOSPersistentVolumeSource, 22 csi CSIPersistentVolumeSource"),
    "VolumeNodeAffinity": "1 required NodeSelector",
    "PersistentVolumeClaimCondition": (
        "1 type str!, 2 status str!, 3 lastProbeTime Time, 4 lastTransitionTime Time, 5 reason str, 6 message str"),
    "ModifyVolumeStatus": "1 targetVolumeAttributesClassName str, 2 status str!",
    "TopologySelectorLabelRequirement": "1 key str!, 2 values []str",
    "GlusterfsPersistentVolumeSource": "1 endpoints str!, 2 path str!, 3 readOnly bool, 4 endpointsNamespace str!",
    "RBDPersistentVolumeSource": (
        "1 monitors []str, 2 image str!, 3 fsType str, 4 pool str, 5 user str, 6 keyring str, "
        "7 secretRef SecretReference, 8 readOnly bool"),
    "ISCSIPersistentVolumeSource": (
        "1 targetPortal str!, 2 iqn str!, 3 lun i32!, 4 iscsiInterface str, 5 fsType str, 6 readOnly bool, "
        "7 portals []str, 8 chapAuthDiscovery bool, 11 chapAuthSession bool, 10 secretRef SecretReference, "
        "12 initiatorName str!"),
    "CinderPersistentVolumeSource": "1 volumeID str!, 2 fsType str, 3 readOnly bool, 4 secretRef SecretReference",
    "CephFSPersistentVolumeSource": (
        "1 monitors []str, 2 path str, 3 user str, 4 secretFile str, 5 secretRef SecretReference, 6 readOnly bool"),
    "FlexPersistentVolumeSource": (
        "1 driver str!, 2 fsType str, 3 secretRef SecretReference, 4 readOnly bool, 5 options {str}"),
    "AzureFilePersistentVolumeSource": "1 secretName str!, 2 shareName str!, 3 readOnly bool, 4 secretNamespace str!",
    "ScaleIOPersistentVolumeSource": (
        "1 gateway str!, 2 system str!, 3 secretRef SecretReference, 4 sslEnabled bool, 5 protectionDomain str, "
        "6 storagePool str, 7 storageMode str, 8 volumeName str, 9 fsType str, 10 readOnly bool"),
    "LocalVolumeSource": "1 path str!, 2 fsType str!",
    "StorageOSPersistentVolumeSource": (
        "1 volumeName str, 2 volumeNamespace str, 3 fsType str, 4 readOnly bool, 5 secretRef ObjectReference"),
    "CSIPersistentVolumeSource": (
        "1 driver str!, 2 volumeHandle str!, 3 readOnly bool, 4 fsType str, 5 volumeAttributes {str}, "
        "6 controllerPublishSecretRef SecretReference, 7 nodeStageSecretRef SecretReference, "
        "8 nodePublishSecretRef SecretReference, 9 controllerExpandSecretRef SecretReference, "
        "10 nodeExpandSecretRef SecretReference"),
    "SecretReference": "1 name str, 2 namespace str",
    # core/v1: secrets, service accounts, services and endpoints
    "Secret": "1 metadata ObjectMeta, 5 immutable bool!, 2 data {bytes}, 4 stringData {str}, 3 type str",
    "ServiceAccount": (
        "1 metadata ObjectMeta, 2 secrets []ObjectReference, 3 imagePullSecrets []LocalObjectReference, "
        "4 automountServiceAccountToken bool!"),
    "Service": "1 metadata ObjectMeta, 2 spec ServiceSpec, 3 status ServiceStatus",
    "ServiceSpec": (
        "1 ports []ServicePort, 2 selector {str}, 3 clusterIP str, 18 clusterIPs []str, 4 type str, "
        "5 externalIPs []str, 7 sessionAffinity str, 8 loadBalancerIP str, 9 loadBalancerSourceRanges []str, "
        "10 externalName str, 11 externalTrafficPolicy str, 12 healthCheckNodePort i32, "
        "13 publishNotReadyAddresses bool, 14 sessionAffinityConfig SessionAffinityConfig, 19 ipFamilies []str, "
        "17 ipFamilyPolicy str!, 20 allocateLoadBalancerNodePorts bool!, 21 loadBalancerClass str!, "
        "22 internalTrafficPolicy str!, 23 trafficDistribution str!"),
    "ServicePort": (
        "1 name str, 2 protocol str, 6 appProtocol str!, 3 port i32!, 4 targetPort IntOrString, 5 nodePort i32"),
    "ServiceStatus": "1 loadBalancer LoadBalancerStatus, 2 conditions []Condition",
    "LoadBalancerStatus": "1 ingress []LoadBalancerIngress",
    "LoadBalancerIngress": "1 ip str, 2 hostname str, 3 ipMode str!, 4 ports []PortStatus",
    "PortStatus": "1 port i32!, 2 protocol str!, 3 error str!",
    "SessionAffinityConfig": "1 clientIP ClientIPConfig",
    "ClientIPConfig": "1 timeoutSeconds i32!",
    "Endpoints": "1 metadata ObjectMeta, 2 subsets []EndpointSubset",
    "EndpointSubset": "1 addresses []EndpointAddress, 2 notReadyAddresses []EndpointAddress, 3 ports []EndpointPort",
    "EndpointAddress": "1 ip str!, 3 hostname str, 4 nodeName str!, 2 targetRef ObjectReference",
    "EndpointPort": "1 name str, 2 port i32!, 3 protocol str, 4 appProtocol str!",
    # discovery/v1 (api discovery/v1/generated.proto); its EndpointPort is SliceEndpointPort here
    "EndpointSlice": (
        "1 metadata ObjectMeta, 4 addressType str!, 2 endpoints []SliceEndpoint, 3 ports []SliceEndpointPort"),
    "SliceEndpoint": (
        "1 addresses []str, 2 conditions EndpointConditions, 3 hostname str!, 4 targetRef ObjectReference, "
        "5 deprecatedTopology {str}, 6 nodeName str!, 7 zone str!, 8 hints EndpointHints"),
    "EndpointConditions": "1 ready bool!, 2 serving bool!, 3 terminating bool!",
    "EndpointHints": "1 forZones []ForZone, 2 forNodes []ForNode",
    "ForZone": "1 name str!",
    "ForNode": "1 name str!",
    "SliceEndpointPort": "1 name str!, 2 protocol str!, 3 port i32!, 4 appProtocol str!",
    # batch/v1 (api batch/v1/generated.proto). Every field is listed, the policies kemu's Job controller does not
    # model too: the table is also the OpenAPI schema, and fieldValidation=Strict must accept real manifests.
    "Job": "1 metadata ObjectMeta, 2 spec JobSpec, 3 status JobStatus",
    "JobSpec": (
        "1 parallelism i32!, 2 completions i32!, 3 activeDeadlineSeconds i64!, 4 selector LabelSelector, "
        "5 manualSelector bool!, 6 template PodTemplateSpec, 7 backoffLimit i32!, 8 ttlSecondsAfterFinished i32!, "
        "9 completionMode str!, 10 suspend bool!, 11 podFailurePolicy PodFailurePolicy, "
        "16 successPolicy SuccessPolicy, 12 backoffLimitPerIndex i32!, 13 maxFailedIndexes i32!, "
        "14 podReplacementPolicy str!, 15 managedBy str!"),
    "PodFailurePolicy": "1 rules []PodFailurePolicyRule",
    "PodFailurePolicyRule": (
        "1 action str!, 2 onExitCodes PodFailurePolicyOnExitCodesRequirement, "
        "3 onPodConditions []PodFailurePolicyOnPodConditionsPattern"),
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName str!, 2 operator str!, 3 values []i32",
    "PodFailurePolicyOnPodConditionsPattern": "1 type str!, 2 status str!",
    "SuccessPolicy": "1 rules []SuccessPolicyRule",
    "SuccessPolicyRule": "1 succeededIndexes str!, 2 succeededCount i32!",
    "UncountedTerminatedPods": "1 succeeded []str, 2 failed []str",
    "JobStatus": (
        "1 conditions []JobCondition, 2 startTime Time, 3 completionTime Time, 4 active i32, 5 succeeded i32, "
        "6 failed i32, 7 completedIndexes str, 9 ready i32!, 10 failedIndexes str!, 11 terminating i32!, "
        "8 uncountedTerminatedPods UncountedTerminatedPods"),
    "JobCondition": (
        "1 type str!, 2 status str!, 3 lastProbeTime Time, 4 lastTransitionTime Time, 5 reason str, 6 message str"),
    "CronJob": "1 metadata ObjectMeta, 2 spec CronJobSpec, 3 status CronJobStatus",
    "CronJobSpec": (
        "1 schedule str!, 8 timeZone str!, 2 startingDeadlineSeconds i64!, 3 concurrencyPolicy str, "
        "4 suspend bool!, 5 jobTemplate JobTemplateSpec, 6 successfulJobsHistoryLimit i32!, "
        "7 failedJobsHistoryLimit i32!"),
    "CronJobStatus": "1 active []ObjectReference, 4 lastScheduleTime Time, 5 lastSuccessfulTime Time",
    "JobTemplateSpec": "1 metadata ObjectMeta, 2 spec JobSpec",
    # apps/v1 (api apps/v1/generated.proto)
    "Deployment": "1 metadata ObjectMeta, 2 spec DeploymentSpec, 3 status DeploymentStatus",
    "ReplicaSet": "1 metadata ObjectMeta, 2 spec ReplicaSetSpec, 3 status ReplicaSetStatus",
    "DaemonSet": "1 metadata ObjectMeta, 2 spec DaemonSetSpec, 3 status DaemonSetStatus",
    "DeploymentSpec": (
        "1 replicas i32!, 2 selector LabelSelector, 3 template PodTemplateSpec, 4 strategy DeploymentStrategy, "
        "5 minReadySeconds i32, 6 revisionHistoryLimit i32!, 7 paused bool, 9 progressDeadlineSeconds i32!"),
    "DeploymentStatus": (
        "1 observedGeneration i64, 2 replicas i32, 3 updatedReplicas i32, 7 readyReplicas i32, "
        "4 availableReplicas i32, 5 unavailableReplicas i32, 6 conditions []DeploymentCondition, "
        "8 collisionCount i32!"),
    "ReplicaSetSpec": "1 replicas i32!, 4 minReadySeconds i32, 2 selector LabelSelector, 3 template PodTemplateSpec",
    "ReplicaSetStatus": (
        "1 replicas i32!, 2 fullyLabeledReplicas i32, 4 readyReplicas i32, 5 availableReplicas i32, "
        "3 observedGeneration i64, 6 conditions []ReplicaSetCondition"),
    "DaemonSetSpec": (
        "1 selector LabelSelector, 2 template PodTemplateSpec, 3 updateStrategy DaemonSetUpdateStrategy, "
        "4 minReadySeconds i32, 6 revisionHistoryLimit i32!"),
    "DaemonSetStatus": (
        "1 currentNumberScheduled i32!, 2 numberMisscheduled i32!, 3 desiredNumberScheduled i32!, 4 numberReady i32!, "
        "5 observedGeneration i64, 6 updatedNumberScheduled i32, 7 numberAvailable i32, 8 numberUnavailable i32, "
        "9 collisionCount i32!, 10 conditions []DaemonSetCondition"),
    "DeploymentStrategy": "1 type str, 2 rollingUpdate RollingUpdateDeployment",
    "DeploymentCondition": (
        "1 type str!, 2 status str!, 6 lastUpdateTime Time, 7 lastTransitionTime Time, 4 reason str, 5 message str"),
    "ReplicaSetCondition": "1 type str!, 2 status str!, 3 lastTransitionTime Time, 4 reason str, 5 message str",
    "DaemonSetUpdateStrategy": "1 type str, 2 rollingUpdate RollingUpdateDaemonSet",
    "DaemonSetCondition": "1 type str!, 2 status str!, 3 lastTransitionTime Time, 4 reason str, 5 message str",
    "RollingUpdateDeployment": "1 maxUnavailable IntOrString, 2 maxSurge IntOrString",
    "RollingUpdateDaemonSet": "1 maxUnavailable IntOrString, 2 maxSurge IntOrString",
    "ControllerRevision": "1 metadata ObjectMeta, 2 data RawExtension, 3 revision i64!",
    "RawExtension": "1 Raw raw!",
    "StatefulSet": "1 metadata ObjectMeta, 2 spec StatefulSetSpec, 3 status StatefulSetStatus",
    "StatefulSetSpec": (
        "1 replicas i32!, 2 selector LabelSelector, 3 template PodTemplateSpec, "
        "4 volumeClaimTemplates []PersistentVolumeClaim, 5 serviceName str, 6 podManagementPolicy str, "
        "7 updateStrategy StatefulSetUpdateStrategy, 8 revisionHistoryLimit i32!, 9 minReadySeconds i32, "
        "10 persistentVolumeClaimRetentionPolicy StatefulSetPersistentVolumeClaimRetentionPolicy, "
        "11 ordinals StatefulSetOrdinals"),
    "StatefulSetStatus": (
        "1 observedGeneration i64, 2 replicas i32!, 3 readyReplicas i32, 4 currentReplicas i32, "
        "5 updatedReplicas i32, 6 currentRevision str, 7 updateRevision str, 9 collisionCount i32!, "
        "10 conditions []StatefulSetCondition, 11 availableReplicas i32!"),
    "StatefulSetUpdateStrategy": "1 type str, 2 rollingUpdate RollingUpdateStatefulSetStrategy",
    "RollingUpdateStatefulSetStrategy": "1 partition i32!, 2 maxUnavailable IntOrString",
    "StatefulSetPersistentVolumeClaimRetentionPolicy": "1 whenDeleted str, 2 whenScaled str",
    "StatefulSetOrdinals": "1 start i32!",
    "StatefulSetCondition": "1 type str!, 2 status str!, 3 lastTransitionTime Time, 4 reason str, 5 message str",
    # policy/v1
    "PodDisruptionBudget": "1 metadata ObjectMeta, 2 spec PodDisruptionBudgetSpec, 3 status PodDisruptionBudgetStatus",
    "PodDisruptionBudgetSpec": (
        "1 minAvailable IntOrString, 2 selector LabelSelector, 3 maxUnavailable IntOrString, "
        "4 unhealthyPodEvictionPolicy str!"),
    "PodDisruptionBudgetStatus": (
        "1 observedGeneration i64, 2 disruptedPods {Time}, 3 disruptionsAllowed i32!, 4 currentHealthy i32!, "
        "5 desiredHealthy i32!, 6 expectedPods i32!, 7 conditions []Condition"),
    "Eviction": "1 metadata ObjectMeta, 2 deleteOptions DeleteOptions",
    # scheduling/v1
    "PriorityClass": (
        "1 metadata ObjectMeta, 2 value i32!, 3 globalDefault bool, 4 description str, 5 preemptionPolicy str!"),
    # coordination/v1
    "Lease": "1 metadata ObjectMeta, 2 spec LeaseSpec",
    "LeaseSpec": (
        "1 holderIdentity str!, 2 leaseDurationSeconds i32!, 3 acquireTime MicroTime, 4 renewTime MicroTime, "
        "5 leaseTransitions i32!, 6 strategy str!, 7 preferredHolder str!"),
    # node/v1
    "RuntimeClass": "1 metadata ObjectMeta, 2 handler str!, 3 overhead Overhead, 4 scheduling Scheduling",
    "Overhead": "1 podFixed {Quantity}",
    "Scheduling": "1 nodeSelector {str}, 2 tolerations []Toleration",
    # autoscaling/v1
    "Scale": "1 metadata ObjectMeta, 2 spec ScaleSpec, 3 status ScaleStatus",
    # Upstream omits a zero spec.replicas from JSON, but kemu's scale handler needs the number: scaling to 0 must say 0.
    "ScaleSpec": "1 replicas i32!",
    "ScaleStatus": "1 replicas i32!, 2 selector str",
    # autoscaling/v1 HorizontalPodAutoscaler (what `kubectl autoscale` sends)
    "HorizontalPodAutoscaler": "1 metadata ObjectMeta, 2 spec HorizontalPodAutoscalerSpec, "
                               "3 status HorizontalPodAutoscalerStatus",
    "HorizontalPodAutoscalerSpec": ("1 scaleTargetRef CrossVersionObjectReference, 2 minReplicas i32!, "
                                    "3 maxReplicas i32!, 4 targetCPUUtilizationPercentage i32!"),
    "CrossVersionObjectReference": "1 kind str!, 2 name str!, 3 apiVersion str",
    "HorizontalPodAutoscalerStatus": ("1 observedGeneration i64!, 2 lastScaleTime Time, 3 currentReplicas i32!, "
                                      "4 desiredReplicas i32!, 5 currentCPUUtilizationPercentage i32!"),
    # storage/v1
    "StorageClass": (
        "1 metadata ObjectMeta, 2 provisioner str!, 3 parameters {str}, 4 reclaimPolicy str!, 5 mountOptions []str, "
        "6 allowVolumeExpansion bool!, 7 volumeBindingMode str!, 8 allowedTopologies []TopologySelectorTerm"),
    # rbac/v1 (api rbac/v1/generated.proto): kubectl create role/rolebinding/clusterrole send these
    "Role": "1 metadata ObjectMeta, 2 rules []PolicyRule",
    "ClusterRole": "1 metadata ObjectMeta, 2 rules []PolicyRule, 3 aggregationRule AggregationRule",
    "RoleBinding": "1 metadata ObjectMeta, 2 subjects []Subject, 3 roleRef RoleRef",
    "ClusterRoleBinding": "1 metadata ObjectMeta, 2 subjects []Subject, 3 roleRef RoleRef",
    "PolicyRule": "1 verbs []str, 2 apiGroups []str, 3 resources []str, 4 resourceNames []str, 5 nonResourceURLs []str",
    "AggregationRule": "1 clusterRoleSelectors []LabelSelector",
    "Subject": "1 kind str!, 2 apiGroup str, 3 name str!, 4 namespace str",
    "RoleRef": "1 apiGroup str!, 2 kind str!, 3 name str!",
    # authorization/v1 (api authorization/v1/generated.proto): kubectl auth can-i
    "SelfSubjectAccessReview": (
        "1 metadata ObjectMeta, 2 spec SelfSubjectAccessReviewSpec, 3 status SubjectAccessReviewStatus"),
    "SelfSubjectAccessReviewSpec": (
        "1 resourceAttributes ResourceAttributes, 2 nonResourceAttributes NonResourceAttributes"),
    "SubjectAccessReview": "1 metadata ObjectMeta, 2 spec SubjectAccessReviewSpec, 3 status SubjectAccessReviewStatus",
    "LocalSubjectAccessReview": (
        "1 metadata ObjectMeta, 2 spec SubjectAccessReviewSpec, 3 status SubjectAccessReviewStatus"),
    "SubjectAccessReviewSpec": (
        "1 resourceAttributes ResourceAttributes, 2 nonResourceAttributes NonResourceAttributes, 3 user str, "
        "4 groups []str, 5 extra {ExtraValue}, 6 uid str"),
    "ResourceAttributes": (
        "1 namespace str, 2 verb str, 3 group str, 4 version str, 5 resource str, 6 subresource str, 7 name str, "
        "8 fieldSelector FieldSelectorAttributes, 9 labelSelector LabelSelectorAttributes"),
    "FieldSelectorAttributes": "1 rawSelector str, 2 requirements []FieldSelectorRequirement",
    "FieldSelectorRequirement": "1 key str!, 2 operator str!, 3 values []str",
    "LabelSelectorAttributes": "1 rawSelector str, 2 requirements []LabelSelectorRequirement",
    "NonResourceAttributes": "1 path str, 2 verb str",
    "SubjectAccessReviewStatus": "1 allowed bool!, 4 denied bool, 2 reason str, 3 evaluationError str",
    "SelfSubjectRulesReview": (
        "1 metadata ObjectMeta, 2 spec SelfSubjectRulesReviewSpec, 3 status SubjectRulesReviewStatus"),
    "SelfSubjectRulesReviewSpec": "1 namespace str",
    "SubjectRulesReviewStatus": (
        "1 resourceRules []ResourceRule, 2 nonResourceRules []NonResourceRule, 3 incomplete bool!, "
        "4 evaluationError str"),
    "ResourceRule": "1 verbs []str, 2 apiGroups []str, 3 resources []str, 4 resourceNames []str",
    "NonResourceRule": "1 verbs []str, 2 nonResourceURLs []str",
    # authentication/v1: kubectl auth whoami. ExtraValue is a JSON list (protobuf._CONVERTERS).
    "SelfSubjectReview": "1 metadata ObjectMeta, 2 status SelfSubjectReviewStatus",
    "SelfSubjectReviewStatus": "1 userInfo UserInfo",
    "UserInfo": "1 username str, 2 uid str, 3 groups []str, 4 extra {ExtraValue}",
    "ExtraValue": "1 items []str",
}

# The kinds a body may carry, each with the apiVersion its message is for. "" accepts any:
# meta/v1 DeleteOptions is registered in every group version, so clients send it under theirs.
TOP_LEVEL: dict[str, str] = {
    "Namespace": "v1", "Node": "v1", "Pod": "v1", "Event": "v1", "ConfigMap": "v1", "LimitRange": "v1",
    "Binding": "v1", "Job": "batch/v1", "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1", "Eviction": "policy/v1", "PriorityClass": "scheduling.k8s.io/v1",
    "Lease": "coordination.k8s.io/v1", "RuntimeClass": "node.k8s.io/v1", "Scale": "autoscaling/v1",
    "PersistentVolume": "v1", "PersistentVolumeClaim": "v1", "StorageClass": "storage.k8s.io/v1",
    "HorizontalPodAutoscaler": "autoscaling/v1",
    "Secret": "v1", "ServiceAccount": "v1", "Service": "v1", "Endpoints": "v1",
    "EndpointSlice": "discovery.k8s.io/v1", "StatefulSet": "apps/v1", "ControllerRevision": "apps/v1",
    "CronJob": "batch/v1",
    "ResourceQuota": "v1",
    "Role": "rbac.authorization.k8s.io/v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1", "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "SelfSubjectAccessReview": "authorization.k8s.io/v1", "SubjectAccessReview": "authorization.k8s.io/v1",
    "LocalSubjectAccessReview": "authorization.k8s.io/v1", "SelfSubjectRulesReview": "authorization.k8s.io/v1",
    "SelfSubjectReview": "authentication.k8s.io/v1",
    "DeleteOptions": "",
}
