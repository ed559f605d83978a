"""Decode Kubernetes protobuf request bodies into the objects their JSON would be.

Why: client-go's typed clientsets send ``application/vnd.kubernetes.protobuf`` bodies for
built-in kinds since 1.31 (kubernetes#125314) and do not fall back to JSON, so ``kubectl
create namespace|configmap|deployment|priorityclass|poddisruptionbudget`` and client-go
programs (a scheduler's Binding, a controller's status update) reach kemu with protobuf.
kemu stores JSON-shaped objects, so this module turns such a body into exactly the dict the
same client would have sent as JSON; responses stay JSON (clients accept either).

The envelope (apimachinery ``pkg/runtime/serializer/protobuf/protobuf.go``): the 4 magic bytes
``k8s\\x00``, then a ``runtime.Unknown`` message (``pkg/runtime/generated.proto``):
``typeMeta`` = 1 (``apiVersion`` = 1, ``kind`` = 2), ``raw`` = 2 (the object's own message,
which carries no apiVersion/kind), ``contentEncoding`` = 3, ``contentType`` = 4. The kind
names the message ``raw`` holds; a missing kind defaults to the URL's, as upstream's
``copyKindDefaults`` does.

The schema is data: :data:`SCHEMA` maps each message name to a compact field list written
from the field numbers, types and JSON names of the upstream messages (``k8s.io/api``
``core/v1``, ``apps/v1``, ``policy/v1``, ``scheduling/v1``, ``coordination/v1``, ``node/v1``,
``autoscaling/v1`` and ``storage/v1`` ``generated.proto`` + ``types.go``; apimachinery
``pkg/apis/meta/v1``, ``pkg/api/resource``, ``pkg/util/intstr``; all at v0.32, the API level
kemu emulates). It covers
every message reachable from the kinds kemu serves and the subresource bodies it takes
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

Messages whose JSON is not an object are converted after decoding (:data:`_CONVERTERS`):
``Time`` (seconds/nanos → RFC 3339 seconds, ``null`` when zero), ``MicroTime`` (RFC 3339
micro), ``Quantity`` (a message whose field 1 is the string form), ``IntOrString``,
``FieldsV1`` (raw JSON). Non-pointer sub-messages are always on the wire, so they come out
as ``{}`` (or ``null`` for a zero time) just as Go's JSON has them; empty repeated and map
fields come out absent (protobuf cannot tell nil from empty).

Errors instead of guesses: a field number a known message does not have is 415
``UnsupportedMediaType`` naming the message, the field and where it was. Upstream's generated
code skips unknown fields; kemu would then store an object missing data the client sent
(a field from a newer API version, or a message this table lacks) and say nothing, whereas
the same object as JSON keeps every field. A body that is not protobuf at all (no magic,
truncated, wrong wire type, bad UTF-8) is 400, like upstream's decode errors.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from emulator.api import errors

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

# The schema. See the module docstring for the notation; numbers and names are upstream's.
SCHEMA: dict[str, str] = {
    # runtime (apimachinery pkg/runtime/generated.proto): the envelope
    "Unknown": "1 typeMeta TypeMeta, 2 raw raw!, 3 contentEncoding str, 4 contentType str",
    "TypeMeta": "1 apiVersion str, 2 kind str",
    # Messages with a non-object JSON form, converted by _CONVERTERS: meta/v1 Time and MicroTime
    # (a Timestamp), resource.Quantity (pkg/api/resource), intstr.IntOrString, meta/v1 FieldsV1.
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
    "Container": (
        "1 name str!, 2 image str, 3 command []str, 4 args []str, 5 workingDir str, 6 ports []ContainerPort, "
        "19 envFrom []EnvFromSource, 7 env []EnvVar, 8 resources ResourceRequirements, "
        "23 resizePolicy []ContainerResizePolicy, 24 restartPolicy str!, 9 volumeMounts []VolumeMount, "
        "21 volumeDevices []VolumeDevice, 10 livenessProbe Probe, 11 readinessProbe Probe, 22 startupProbe Probe, "
        "12 lifecycle Lifecycle, 13 terminationMessagePath str, 20 terminationMessagePolicy str, "
        "14 imagePullPolicy str, 15 securityContext SecurityContext, 16 stdin bool, 17 stdinOnce bool, 18 tty bool"),
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
    "EphemeralContainerCommon": (
        "1 name str!, 2 image str, 3 command []str, 4 args []str, 5 workingDir str, 6 ports []ContainerPort, "
        "19 envFrom []EnvFromSource, 7 env []EnvVar, 8 resources ResourceRequirements, "
        "23 resizePolicy []ContainerResizePolicy, 24 restartPolicy str!, 9 volumeMounts []VolumeMount, "
        "21 volumeDevices []VolumeDevice, 10 livenessProbe Probe, 11 readinessProbe Probe, 22 startupProbe Probe, "
        "12 lifecycle Lifecycle, 13 terminationMessagePath str, 20 terminationMessagePolicy str, "
        "14 imagePullPolicy str, 15 securityContext SecurityContext, 16 stdin bool, 17 stdinOnce bool, 18 tty bool"),
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
    # batch/v1 (api batch/v1/generated.proto; pod failure / success policies not modelled)
    "Job": "1 metadata ObjectMeta, 2 spec JobSpec, 3 status JobStatus",
    "JobSpec": (
        "1 parallelism i32!, 2 completions i32!, 3 activeDeadlineSeconds i64!, 4 selector LabelSelector, "
        "5 manualSelector bool!, 6 template PodTemplateSpec, 7 backoffLimit i32!, 8 ttlSecondsAfterFinished i32!, "
        "9 completionMode str!, 10 suspend bool!, 12 backoffLimitPerIndex i32!, 13 maxFailedIndexes i32!, "
        "14 podReplacementPolicy str!, 15 managedBy str!"),
    "JobStatus": (
        "1 conditions []JobCondition, 2 startTime Time, 3 completionTime Time, 4 active i32, 5 succeeded i32, "
        "6 failed i32, 7 completedIndexes str, 9 ready i32!, 10 failedIndexes str!, 11 terminating i32!"),
    "JobCondition": (
        "1 type str!, 2 status str!, 3 lastProbeTime Time, 4 lastTransitionTime Time, 5 reason str, 6 message str"),
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
}

# The kinds a body may carry, each with the apiVersion its message is for. "" accepts any:
# meta/v1 DeleteOptions is registered in every group version, so clients send it under theirs.
TOP_LEVEL: dict[str, str] = {
    "Namespace": "v1", "Node": "v1", "Pod": "v1", "Event": "v1", "ConfigMap": "v1", "LimitRange": "v1",
    "Binding": "v1", "Job": "batch/v1", "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1", "Eviction": "policy/v1", "PriorityClass": "scheduling.k8s.io/v1",
    "Lease": "coordination.k8s.io/v1", "RuntimeClass": "node.k8s.io/v1", "Scale": "autoscaling/v1",
    "PersistentVolume": "v1", "PersistentVolumeClaim": "v1", "StorageClass": "storage.k8s.io/v1",
    "ResourceQuota": "v1", "HorizontalPodAutoscaler": "autoscaling/v1",
    "DeleteOptions": "",
}

_VARINT = frozenset({"bool", "i32", "i64"})
SCALARS = _VARINT | {"str", "bytes", "raw"}
_U64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: what the schema line ``NUMBER JSONNAME TYPE`` says."""

    number: int
    json: str  # "" when the sub-message's fields are inlined into the parent's JSON
    type: str  # a scalar (SCALARS) or a message name
    repeated: bool = False
    map: bool = False  # map<string, type>: repeated entries {key = 1, value = 2}
    keep_zero: bool = False

    @property
    def wire_type(self) -> int:
        return 0 if self.type in _VARINT and not self.map else 2


@dataclass(frozen=True, slots=True)
class Message:
    name: str
    fields: dict[int, Field]  # in Go struct order, which is the order of the JSON keys


def _parse_field(token: str) -> Field:
    number, json_name, spec = token.split(" ")
    repeated = spec.startswith("[]")
    spec = spec.removeprefix("[]")
    is_map = spec.startswith("{") and spec.endswith("}")
    spec = spec.strip("{}")
    keep_zero = spec.endswith("!")
    return Field(int(number), "" if json_name == "..." else json_name, spec.rstrip("!"), repeated, is_map, keep_zero)


def _load(schema: dict[str, str]) -> dict[str, Message]:
    messages = {}
    for name, spec in schema.items():
        fields = [_parse_field(token) for token in spec.split(", ")]
        messages[name] = Message(name, {f.number: f for f in fields})
        if len(messages[name].fields) != len(fields):
            raise ValueError(f"protobuf schema: {name} repeats a field number")
    for message in messages.values():  # a typo in the table fails at import, not on some request
        for f in message.fields.values():
            if f.type not in SCALARS and f.type not in messages:
                raise ValueError(f"protobuf schema: {message.name}.{f.json} has unknown type {f.type}")
            if f.keep_zero and (f.type not in SCALARS or f.repeated or f.map):
                raise ValueError(f"protobuf schema: {message.name}.{f.json}: '!' is for singular scalars")
            if not f.json and (f.type in SCALARS or f.type in _CONVERTERS or f.repeated or f.map):
                raise ValueError(f"protobuf schema: {message.name} field {f.number}: only messages inline")
    return messages


class _Invalid(Exception):
    """The bytes are not a valid encoding (400)."""


class _Unsupported(Exception):
    """Valid protobuf that kemu's schema does not cover (415)."""


def decode(body: bytes, default_kind: str) -> dict[str, Any]:
    """The JSON-shaped object a protobuf request body holds.

    ``default_kind`` is the kind the URL expects: used when the envelope names none, and in
    400 messages. Raises 400 for bytes that are not protobuf, 415 for protobuf this schema
    does not cover.
    """
    try:
        if not body.startswith(MAGIC):
            # Upstream's wording (protobuf.go Decode).
            raise _Invalid(f"provided data does not appear to be a protobuf message, expected prefix {list(MAGIC)}")
        envelope = _message(MESSAGES["Unknown"], body[len(MAGIC):], "")
        type_meta = envelope.get("typeMeta") or {}
        api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "") or default_kind
        if envelope.get("contentEncoding"):
            raise _Unsupported(f"content encoding {envelope['contentEncoding']!r} in the envelope")
        if envelope.get("contentType", MEDIA_TYPE) != MEDIA_TYPE:
            raise _Unsupported(f"content type {envelope['contentType']!r} in the envelope")
        expected = TOP_LEVEL.get(kind)
        if expected is None or (expected and api_version and api_version != expected):
            raise _Unsupported(f"kemu has no protobuf schema for {api_version or '?'} {kind}")
        obj = _message(MESSAGES[kind], envelope.get("raw", b""), "")
    except _Invalid as e:
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {default_kind}): "
                                 f"invalid protobuf: {e}") from None
    except _Unsupported as e:
        raise errors.StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: "
                                 f"{MEDIA_TYPE}: {e}; send this object as application/json") from None
    head = {"kind": kind, "apiVersion": api_version or expected} if api_version or expected else {"kind": kind}
    return {**head, **obj}


# ---------------------------------------------------------------------------- wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf):
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _U64, pos  # Go keeps the low 64 bits of a 10-byte varint
        shift += 7
        if shift >= 70:
            raise _Invalid("varint longer than 10 bytes")
    raise _Invalid("truncated varint")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field: an int for varints, bytes otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Invalid("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if size > end - pos:
                raise _Invalid("truncated length-delimited field")
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):  # fixed64 / fixed32: no Kubernetes field uses them, but they are valid protobuf
            size = 8 if wire == 1 else 4
            if size > end - pos:
                raise _Invalid("truncated fixed-size field")
            value, pos = buf[pos:pos + size], pos + size
        else:  # 3/4 are proto2 groups (never generated for Kubernetes types), 6/7 do not exist
            raise _Invalid(f"wire type {wire}")
        yield number, wire, value


def _packed(buf: bytes) -> list[int]:
    values, pos = [], 0
    while pos < len(buf):
        value, pos = _varint(buf, pos)
        values.append(value)
    return values


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ---------------------------------------------------------------------------- messages
def _message(message: Message, buf: bytes, path: str) -> Any:
    """Decode one message; ``path`` (JSON path of the message) is for error messages."""
    seen: dict[int, list[Any]] = {}
    for number, wire, value in _fields(buf):
        field = message.fields.get(number)
        if field is None:
            raise _Unsupported(f"field {number} of {message.name} (at {path or 'the top level'}) is not in "
                               "kemu's protobuf schema")
        if wire == field.wire_type:
            seen.setdefault(number, []).append(value)
        elif wire == 2 and field.repeated and field.type in _VARINT:  # packed repeated numbers
            seen.setdefault(number, []).extend(_packed(value))
        else:
            raise _Invalid(f"{_join(path, field.json or field.type)} ({message.name} field {number}) has wire type "
                           f"{wire}, want {field.wire_type}")
    out: dict[str, Any] = {}
    for number, field in message.fields.items():
        values = seen.get(number)
        if values is None:
            continue
        where = _join(path, field.json)
        if field.map:
            out[field.json] = dict(_entry(message, field, v, where) for v in values)
        elif field.repeated:
            out[field.json] = [_value(field.type, v, f"{where}[{i}]") for i, v in enumerate(values)]
        elif field.type in MESSAGES:
            # A singular message sent more than once is merged, which protobuf defines as
            # decoding the concatenation.
            value = _value(field.type, b"".join(values), where)
            if field.json:
                out[field.json] = value
            else:
                out.update(value)
        else:
            value = _scalar(field.type, values[-1], where)  # the last of repeated singular scalars wins
            if value or field.keep_zero:
                out[field.json] = value
    convert = _CONVERTERS.get(message.name)
    return convert(out, path) if convert else out


def _entry(message: Message, field: Field, buf: bytes, path: str) -> tuple[str, Any]:
    """One map<string, T> entry: a message with key = 1 and value = 2."""
    key, value = "", None
    for number, wire, v in _fields(buf):
        if number not in (1, 2):
            raise _Unsupported(f"field {number} of a {message.name}.{field.json} map entry (at {path}) is not in "
                               "kemu's protobuf schema")
        if wire != (0 if number == 2 and field.type in _VARINT else 2):
            raise _Invalid(f"{path}: map entry field {number} has wire type {wire}")
        if number == 1:
            key = _scalar("str", v, path)
        else:
            value = v
    if value is None:  # an absent value is the zero value
        value = 0 if field.type in _VARINT else b""
    return key, _value(field.type, value, f"{path}[{key}]")


def _value(type_: str, raw: Any, path: str) -> Any:
    message = MESSAGES.get(type_)
    return _message(message, raw, path) if message else _scalar(type_, raw, path)


def _scalar(type_: str, raw: Any, path: str) -> Any:
    if type_ == "str":
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise _Invalid(f"{path}: string is not UTF-8") from None
    if type_ == "bytes":
        return base64.b64encode(raw).decode("ascii")  # Go's JSON form of []byte
    if type_ == "raw":
        return raw
    if type_ == "bool":
        return raw != 0
    if type_ == "i32":  # Go's int32(x): negatives arrive as 10-byte two's complement
        raw &= 0xFFFFFFFF
        return raw - (1 << 32) if raw >= 1 << 31 else raw
    return raw - (1 << 64) if raw >= 1 << 63 else raw  # i64


# ---------------------------------------------------------------------------- non-object JSON forms
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_TIME = -62135596800  # time.Time{} (0001-01-01T00:00:00Z) in Unix seconds: JSON null


def _instant(timestamp: dict[str, int], path: str) -> datetime | None:
    # meta/v1 time_proto.go: a zero time is written as an empty message; otherwise
    # time.Unix(seconds, nanos), which normalises nanos outside [0, 1e9).
    if not timestamp:
        return None
    seconds, nanos = divmod(timestamp.get("seconds", 0) * 1_000_000_000 + timestamp.get("nanos", 0), 1_000_000_000)
    if seconds == _GO_ZERO_TIME and nanos == 0:
        return None
    try:
        return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise _Invalid(f"{path}: time outside years 1-9999") from None


def _rfc3339(t: datetime) -> str:
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def _time(timestamp: dict[str, int], path: str) -> str | None:
    t = _instant(timestamp, path)  # meta/v1 time.go MarshalJSON: RFC 3339, whole seconds, UTC
    return None if t is None else _rfc3339(t) + "Z"


def _micro_time(timestamp: dict[str, int], path: str) -> str | None:
    t = _instant(timestamp, path)  # meta/v1 micro_time.go: RFC3339Micro, truncated to microseconds
    return None if t is None else f"{_rfc3339(t)}.{t.microsecond:06d}Z"


def _quantity(q: dict[str, str], path: str) -> str:
    # resource/quantity_proto.go: field 1 is the string form; an empty message is the zero Quantity.
    if "string" not in q:
        return "0"
    if not q["string"]:
        raise _Invalid(f"{path}: empty quantity")
    return q["string"]


def _int_or_string(v: dict[str, Any], path: str) -> int | str:
    kind = v.get("type", 0)  # intstr.go: Type 0 is Int, 1 is String
    if kind not in (0, 1):
        raise _Invalid(f"{path}: IntOrString type {kind}")
    return v.get("intVal", 0) if kind == 0 else v.get("strVal", "")


def _fields_v1(v: dict[str, bytes], path: str) -> Any:
    try:  # FieldsV1.Raw holds the JSON of the field set, and is its JSON form
        return orjson.loads(v.get("Raw", b""))
    except orjson.JSONDecodeError:
        raise _Invalid(f"{path}: FieldsV1 is not JSON") from None


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "Time": _time, "MicroTime": _micro_time, "Quantity": _quantity, "IntOrString": _int_or_string,
    "FieldsV1": _fields_v1,
}

MESSAGES: dict[str, Message] = _load(SCHEMA)
