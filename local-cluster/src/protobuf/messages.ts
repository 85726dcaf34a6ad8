// Field numbers and Go field shapes of the v1.32 messages the local cluster
// decodes, transcribed from the protobuf and json struct tags of k8s.io/api
// core/v1, batch/v1, coordination/v1 types.go and apimachinery meta/v1 (the
// tags generated.proto is made from). One string per message, one entry per
// field:
//
//   <json name>=<number> [[] | {} | ^]<type>[*]
//
//   []     repeated            {}  map<string, type>     ^  embedded struct
//                                                           (json:",inline")
//   type   s string, b bool, i32/i64 varint, f64 double, y bytes (base64 in
//          JSON), t metav1.Time, mt metav1.MicroTime, q resource.Quantity,
//          ios intstr.IntOrString, fv1 metav1.FieldsV1, or a message below
//   *      the zero value is kept: a pointer (*int32, *bool ...) or a field
//          without omitempty. Without it a zero scalar is dropped, because Go
//          writes every non-pointer scalar to the wire but leaves it out of
//          its JSON (omitempty), and the decoded object must be what the
//          client would have sent as JSON.
//
// Fields are listed in struct order. Fields added after v1.32 are left out on
// purpose: a v1.32 client never sends them, and Go skips unknown numbers.

export const MESSAGES: Readonly<Record<string, string>> = {
  // ---- meta/v1 ----
  ObjectMeta: 'name=1 s, generateName=2 s, namespace=3 s, selfLink=4 s, uid=5 s, resourceVersion=6 s, generation=7 i64, '
    + 'creationTimestamp=8 t, deletionTimestamp=9 t*, deletionGracePeriodSeconds=10 i64*, labels=11 {}s, annotations=12 {}s, '
    + 'ownerReferences=13 []OwnerReference, finalizers=14 []s, managedFields=17 []ManagedFieldsEntry',
  OwnerReference: 'apiVersion=5 s*, kind=1 s*, name=3 s*, uid=4 s*, controller=6 b*, blockOwnerDeletion=7 b*',
  ManagedFieldsEntry: 'manager=1 s, operation=2 s, apiVersion=3 s, time=4 t*, fieldsType=6 s, fieldsV1=7 fv1*, subresource=8 s',
  LabelSelector: 'matchLabels=1 {}s, matchExpressions=2 []LabelSelectorRequirement',
  LabelSelectorRequirement: 'key=1 s*, operator=2 s*, values=3 []s',
  DeleteOptions: 'gracePeriodSeconds=1 i64*, preconditions=2 Preconditions, orphanDependents=3 b*, propagationPolicy=4 s*, '
    + 'dryRun=5 []s, ignoreStoreReadErrorWithClusterBreakingPotential=6 b*',
  Preconditions: 'uid=1 s*, resourceVersion=2 s*',

  // ---- core/v1: kinds ----
  Secret: 'metadata=1 ObjectMeta, immutable=5 b*, data=2 {}y, stringData=4 {}s, type=3 s',
  ConfigMap: 'metadata=1 ObjectMeta, immutable=4 b*, data=2 {}s, binaryData=3 {}y',
  Namespace: 'metadata=1 ObjectMeta, spec=2 NamespaceSpec, status=3 NamespaceStatus',
  NamespaceSpec: 'finalizers=1 []s',
  NamespaceStatus: 'phase=1 s, conditions=2 []NamespaceCondition',
  NamespaceCondition: 'type=1 s*, status=2 s*, lastTransitionTime=4 t, reason=5 s, message=6 s',
  ServiceAccount: 'metadata=1 ObjectMeta, secrets=2 []ObjectReference, imagePullSecrets=3 []LocalObjectReference, '
    + 'automountServiceAccountToken=4 b*',
  Event: 'metadata=1 ObjectMeta, involvedObject=2 ObjectReference, reason=3 s, message=4 s, source=5 EventSource, '
    + 'firstTimestamp=6 t, lastTimestamp=7 t, count=8 i32, type=9 s, eventTime=10 mt, series=11 EventSeries, action=12 s, '
    + 'related=13 ObjectReference, reportingComponent=14 s*, reportingInstance=15 s*',
  EventSource: 'component=1 s, host=2 s',
  EventSeries: 'count=1 i32, lastObservedTime=2 mt',
  Pod: 'metadata=1 ObjectMeta, spec=2 PodSpec, status=3 PodStatus',
  PodTemplateSpec: 'metadata=1 ObjectMeta, spec=2 PodSpec',

  // ---- core/v1: references ----
  ObjectReference: 'kind=1 s, namespace=2 s, name=3 s, uid=4 s, apiVersion=5 s, resourceVersion=6 s, fieldPath=7 s',
  LocalObjectReference: 'name=1 s',
  TypedLocalObjectReference: 'apiGroup=1 s*, kind=2 s*, name=3 s*',
  TypedObjectReference: 'apiGroup=1 s*, kind=2 s*, name=3 s*, namespace=4 s*',

  // ---- core/v1: pod spec ----
  PodSpec: 'volumes=1 []Volume, initContainers=20 []Container, containers=2 []Container, '
    + 'ephemeralContainers=34 []EphemeralContainer, restartPolicy=3 s, terminationGracePeriodSeconds=4 i64*, '
    + 'activeDeadlineSeconds=5 i64*, dnsPolicy=6 s, nodeSelector=7 {}s, serviceAccountName=8 s, serviceAccount=9 s, '
    + 'automountServiceAccountToken=21 b*, nodeName=10 s, hostNetwork=11 b, hostPID=12 b, hostIPC=13 b, '
    + 'shareProcessNamespace=27 b*, securityContext=14 PodSecurityContext, imagePullSecrets=15 []LocalObjectReference, '
    + 'hostname=16 s, subdomain=17 s, affinity=18 Affinity, schedulerName=19 s, tolerations=22 []Toleration, '
    + 'hostAliases=23 []HostAlias, priorityClassName=24 s, priority=25 i32*, dnsConfig=26 PodDNSConfig, '
    + 'readinessGates=28 []PodReadinessGate, runtimeClassName=29 s*, enableServiceLinks=30 b*, preemptionPolicy=31 s*, '
    + 'overhead=32 {}q, topologySpreadConstraints=33 []TopologySpreadConstraint, setHostnameAsFQDN=35 b*, os=36 PodOS, '
    + 'hostUsers=37 b*, schedulingGates=38 []PodSchedulingGate, resourceClaims=39 []PodResourceClaim, '
    + 'resources=40 ResourceRequirements',
  Container: 'name=1 s*, image=2 s, command=3 []s, args=4 []s, workingDir=5 s, ports=6 []ContainerPort, '
    + 'envFrom=19 []EnvFromSource, env=7 []EnvVar, resources=8 ResourceRequirements, resizePolicy=23 []ContainerResizePolicy, '
    + 'restartPolicy=24 s*, volumeMounts=9 []VolumeMount, volumeDevices=21 []VolumeDevice, livenessProbe=10 Probe, '
    + 'readinessProbe=11 Probe, startupProbe=22 Probe, lifecycle=12 Lifecycle, terminationMessagePath=13 s, '
    + 'terminationMessagePolicy=20 s, imagePullPolicy=14 s, securityContext=15 SecurityContext, stdin=16 b, '
    + 'stdinOnce=17 b, tty=18 b',
  // EphemeralContainerCommon has Container's fields and numbers.
  EphemeralContainer: 'ephemeralContainerCommon=1 ^Container, targetContainerName=2 s',
  ContainerPort: 'name=1 s, hostPort=2 i32, containerPort=3 i32*, protocol=4 s, hostIP=5 s',
  EnvVar: 'name=1 s*, value=2 s, valueFrom=3 EnvVarSource',
  EnvVarSource: 'fieldRef=1 ObjectFieldSelector, resourceFieldRef=2 ResourceFieldSelector, '
    + 'configMapKeyRef=3 ConfigMapKeySelector, secretKeyRef=4 SecretKeySelector',
  ObjectFieldSelector: 'apiVersion=1 s, fieldPath=2 s*',
  ResourceFieldSelector: 'containerName=1 s, resource=2 s*, divisor=3 q',
  ConfigMapKeySelector: 'localObjectReference=1 ^LocalObjectReference, key=2 s*, optional=3 b*',
  SecretKeySelector: 'localObjectReference=1 ^LocalObjectReference, key=2 s*, optional=3 b*',
  EnvFromSource: 'prefix=1 s, configMapRef=2 ConfigMapEnvSource, secretRef=3 SecretEnvSource',
  ConfigMapEnvSource: 'localObjectReference=1 ^LocalObjectReference, optional=2 b*',
  SecretEnvSource: 'localObjectReference=1 ^LocalObjectReference, optional=2 b*',
  ResourceRequirements: 'limits=1 {}q, requests=2 {}q, claims=3 []ResourceClaim',
  ResourceClaim: 'name=1 s*, request=2 s',
  ContainerResizePolicy: 'resourceName=1 s*, restartPolicy=2 s*',
  VolumeMount: 'name=1 s*, readOnly=2 b, recursiveReadOnly=7 s*, mountPath=3 s*, subPath=4 s, mountPropagation=5 s*, '
    + 'subPathExpr=6 s',
  VolumeDevice: 'name=1 s*, devicePath=2 s*',
  Probe: 'handler=1 ^ProbeHandler, initialDelaySeconds=2 i32, timeoutSeconds=3 i32, periodSeconds=4 i32, '
    + 'successThreshold=5 i32, failureThreshold=6 i32, terminationGracePeriodSeconds=7 i64*',
  ProbeHandler: 'exec=1 ExecAction, httpGet=2 HTTPGetAction, tcpSocket=3 TCPSocketAction, grpc=4 GRPCAction',
  ExecAction: 'command=1 []s',
  HTTPGetAction: 'path=1 s, port=2 ios*, host=3 s, scheme=4 s, httpHeaders=5 []HTTPHeader',
  HTTPHeader: 'name=1 s*, value=2 s*',
  TCPSocketAction: 'port=1 ios*, host=2 s',
  GRPCAction: 'port=1 i32*, service=2 s*',
  Lifecycle: 'postStart=1 LifecycleHandler, preStop=2 LifecycleHandler',
  LifecycleHandler: 'exec=1 ExecAction, httpGet=2 HTTPGetAction, tcpSocket=3 TCPSocketAction, sleep=4 SleepAction',
  SleepAction: 'seconds=1 i64*',
  SecurityContext: 'capabilities=1 Capabilities, privileged=2 b*, seLinuxOptions=3 SELinuxOptions, '
    + 'windowsOptions=10 WindowsSecurityContextOptions, runAsUser=4 i64*, runAsGroup=8 i64*, runAsNonRoot=5 b*, '
    + 'readOnlyRootFilesystem=6 b*, allowPrivilegeEscalation=7 b*, procMount=9 s*, seccompProfile=11 SeccompProfile, '
    + 'appArmorProfile=12 AppArmorProfile',
  Capabilities: 'add=1 []s, drop=2 []s',
  SELinuxOptions: 'user=1 s, role=2 s, type=3 s, level=4 s',
  WindowsSecurityContextOptions: 'gmsaCredentialSpecName=1 s*, gmsaCredentialSpec=2 s*, runAsUserName=3 s*, hostProcess=4 b*',
  SeccompProfile: 'type=1 s*, localhostProfile=2 s*',
  AppArmorProfile: 'type=1 s*, localhostProfile=2 s*',
  PodSecurityContext: 'seLinuxOptions=1 SELinuxOptions, windowsOptions=8 WindowsSecurityContextOptions, runAsUser=2 i64*, '
    + 'runAsGroup=6 i64*, runAsNonRoot=3 b*, supplementalGroups=4 []i64, supplementalGroupsPolicy=12 s*, fsGroup=5 i64*, '
    + 'sysctls=7 []Sysctl, fsGroupChangePolicy=9 s*, seccompProfile=10 SeccompProfile, appArmorProfile=11 AppArmorProfile, '
    + 'seLinuxChangePolicy=13 s*',
  Sysctl: 'name=1 s*, value=2 s*',
  Affinity: 'nodeAffinity=1 NodeAffinity, podAffinity=2 PodAffinity, podAntiAffinity=3 PodAntiAffinity',
  NodeAffinity: 'requiredDuringSchedulingIgnoredDuringExecution=1 NodeSelector, '
    + 'preferredDuringSchedulingIgnoredDuringExecution=2 []PreferredSchedulingTerm',
  NodeSelector: 'nodeSelectorTerms=1 []NodeSelectorTerm',
  NodeSelectorTerm: 'matchExpressions=1 []NodeSelectorRequirement, matchFields=2 []NodeSelectorRequirement',
  NodeSelectorRequirement: 'key=1 s*, operator=2 s*, values=3 []s',
  PreferredSchedulingTerm: 'weight=1 i32*, preference=2 NodeSelectorTerm',
  PodAffinity: 'requiredDuringSchedulingIgnoredDuringExecution=1 []PodAffinityTerm, '
    + 'preferredDuringSchedulingIgnoredDuringExecution=2 []WeightedPodAffinityTerm',
  PodAntiAffinity: 'requiredDuringSchedulingIgnoredDuringExecution=1 []PodAffinityTerm, '
    + 'preferredDuringSchedulingIgnoredDuringExecution=2 []WeightedPodAffinityTerm',
  PodAffinityTerm: 'labelSelector=1 LabelSelector, namespaces=2 []s, topologyKey=3 s*, namespaceSelector=4 LabelSelector, '
    + 'matchLabelKeys=5 []s, mismatchLabelKeys=6 []s',
  WeightedPodAffinityTerm: 'weight=1 i32*, podAffinityTerm=2 PodAffinityTerm',
  Toleration: 'key=1 s, operator=2 s, value=3 s, effect=4 s, tolerationSeconds=5 i64*',
  HostAlias: 'ip=1 s*, hostnames=2 []s',
  PodDNSConfig: 'nameservers=1 []s, searches=2 []s, options=3 []PodDNSConfigOption',
  PodDNSConfigOption: 'name=1 s, value=2 s*',
  PodReadinessGate: 'conditionType=1 s*',
  TopologySpreadConstraint: 'maxSkew=1 i32*, topologyKey=2 s*, whenUnsatisfiable=3 s*, labelSelector=4 LabelSelector, '
    + 'minDomains=5 i32*, nodeAffinityPolicy=6 s*, nodeTaintsPolicy=7 s*, matchLabelKeys=8 []s',
  PodOS: 'name=1 s*',
  PodSchedulingGate: 'name=1 s*',
  PodResourceClaim: 'name=1 s*, resourceClaimName=3 s*, resourceClaimTemplateName=4 s*',

  // ---- core/v1: volumes ----
  Volume: 'name=1 s*, volumeSource=2 ^VolumeSource',
  VolumeSource: 'hostPath=1 HostPathVolumeSource, emptyDir=2 EmptyDirVolumeSource, '
    + 'gcePersistentDisk=3 GCEPersistentDiskVolumeSource, awsElasticBlockStore=4 AWSElasticBlockStoreVolumeSource, '
    + 'gitRepo=5 GitRepoVolumeSource, secret=6 SecretVolumeSource, nfs=7 NFSVolumeSource, iscsi=8 ISCSIVolumeSource, '
    + 'glusterfs=9 GlusterfsVolumeSource, persistentVolumeClaim=10 PersistentVolumeClaimVolumeSource, '
    + 'rbd=11 RBDVolumeSource, flexVolume=12 FlexVolumeSource, cinder=13 CinderVolumeSource, cephfs=14 CephFSVolumeSource, '
    + 'flocker=15 FlockerVolumeSource, downwardAPI=16 DownwardAPIVolumeSource, fc=17 FCVolumeSource, '
    + 'azureFile=18 AzureFileVolumeSource, configMap=19 ConfigMapVolumeSource, '
    + 'vsphereVolume=20 VsphereVirtualDiskVolumeSource, quobyte=21 QuobyteVolumeSource, azureDisk=22 AzureDiskVolumeSource, '
    + 'photonPersistentDisk=23 PhotonPersistentDiskVolumeSource, projected=26 ProjectedVolumeSource, '
    + 'portworxVolume=24 PortworxVolumeSource, scaleIO=25 ScaleIOVolumeSource, storageos=27 StorageOSVolumeSource, '
    + 'csi=28 CSIVolumeSource, ephemeral=29 EphemeralVolumeSource, image=30 ImageVolumeSource',
  HostPathVolumeSource: 'path=1 s*, type=2 s*',
  EmptyDirVolumeSource: 'medium=1 s, sizeLimit=2 q*',
  GCEPersistentDiskVolumeSource: 'pdName=1 s*, fsType=2 s, partition=3 i32, readOnly=4 b',
  AWSElasticBlockStoreVolumeSource: 'volumeID=1 s*, fsType=2 s, partition=3 i32, readOnly=4 b',
  GitRepoVolumeSource: 'repository=1 s*, revision=2 s, directory=3 s',
  SecretVolumeSource: 'secretName=1 s, items=2 []KeyToPath, defaultMode=3 i32*, optional=4 b*',
  NFSVolumeSource: 'server=1 s*, path=2 s*, readOnly=3 b',
  ISCSIVolumeSource: 'targetPortal=1 s*, iqn=2 s*, lun=3 i32*, iscsiInterface=4 s, fsType=5 s, readOnly=6 b, portals=7 []s, '
    + 'chapAuthDiscovery=8 b, chapAuthSession=11 b, secretRef=10 LocalObjectReference, initiatorName=12 s*',
  GlusterfsVolumeSource: 'endpoints=1 s*, path=2 s*, readOnly=3 b',
  PersistentVolumeClaimVolumeSource: 'claimName=1 s*, readOnly=2 b',
  RBDVolumeSource: 'monitors=1 []s, image=2 s*, fsType=3 s, pool=4 s, user=5 s, keyring=6 s, secretRef=7 LocalObjectReference, '
    + 'readOnly=8 b',
  FlexVolumeSource: 'driver=1 s*, fsType=2 s, secretRef=3 LocalObjectReference, readOnly=4 b, options=5 {}s',
  CinderVolumeSource: 'volumeID=1 s*, fsType=2 s, readOnly=3 b, secretRef=4 LocalObjectReference',
  CephFSVolumeSource: 'monitors=1 []s, path=2 s, user=3 s, secretFile=4 s, secretRef=5 LocalObjectReference, readOnly=6 b',
  FlockerVolumeSource: 'datasetName=1 s, datasetUUID=2 s',
  DownwardAPIVolumeSource: 'items=1 []DownwardAPIVolumeFile, defaultMode=2 i32*',
  DownwardAPIVolumeFile: 'path=1 s*, fieldRef=2 ObjectFieldSelector, resourceFieldRef=3 ResourceFieldSelector, mode=4 i32*',
  FCVolumeSource: 'targetWWNs=1 []s, lun=2 i32*, fsType=3 s, readOnly=4 b, wwids=5 []s',
  AzureFileVolumeSource: 'secretName=1 s*, shareName=2 s*, readOnly=3 b',
  ConfigMapVolumeSource: 'localObjectReference=1 ^LocalObjectReference, items=2 []KeyToPath, defaultMode=3 i32*, optional=4 b*',
  VsphereVirtualDiskVolumeSource: 'volumePath=1 s*, fsType=2 s, storagePolicyName=3 s, storagePolicyID=4 s',
  QuobyteVolumeSource: 'registry=1 s*, volume=2 s*, readOnly=3 b, user=4 s, group=5 s, tenant=6 s',
  AzureDiskVolumeSource: 'diskName=1 s*, diskURI=2 s*, cachingMode=3 s*, fsType=4 s*, readOnly=5 b*, kind=6 s*',
  PhotonPersistentDiskVolumeSource: 'pdID=1 s*, fsType=2 s',
  ProjectedVolumeSource: 'sources=1 []VolumeProjection, defaultMode=2 i32*',
  VolumeProjection: 'secret=1 SecretProjection, downwardAPI=2 DownwardAPIProjection, configMap=3 ConfigMapProjection, '
    + 'serviceAccountToken=4 ServiceAccountTokenProjection, clusterTrustBundle=5 ClusterTrustBundleProjection',
  SecretProjection: 'localObjectReference=1 ^LocalObjectReference, items=2 []KeyToPath, optional=4 b*',
  ConfigMapProjection: 'localObjectReference=1 ^LocalObjectReference, items=2 []KeyToPath, optional=4 b*',
  DownwardAPIProjection: 'items=1 []DownwardAPIVolumeFile',
  ServiceAccountTokenProjection: 'audience=1 s, expirationSeconds=2 i64*, path=3 s*',
  ClusterTrustBundleProjection: 'name=1 s*, signerName=2 s*, labelSelector=3 LabelSelector, optional=5 b*, path=4 s*',
  KeyToPath: 'key=1 s*, path=2 s*, mode=3 i32*',
  PortworxVolumeSource: 'volumeID=1 s*, fsType=2 s, readOnly=3 b',
  ScaleIOVolumeSource: 'gateway=1 s*, system=2 s*, secretRef=3 LocalObjectReference, sslEnabled=4 b, protectionDomain=5 s, '
    + 'storagePool=6 s, storageMode=7 s, volumeName=8 s, fsType=9 s, readOnly=10 b',
  StorageOSVolumeSource: 'volumeName=1 s, volumeNamespace=2 s, fsType=3 s, readOnly=4 b, secretRef=5 LocalObjectReference',
  CSIVolumeSource: 'driver=1 s*, readOnly=2 b*, fsType=3 s*, volumeAttributes=4 {}s, nodePublishSecretRef=5 LocalObjectReference',
  EphemeralVolumeSource: 'volumeClaimTemplate=1 PersistentVolumeClaimTemplate',
  PersistentVolumeClaimTemplate: 'metadata=1 ObjectMeta, spec=2 PersistentVolumeClaimSpec',
  PersistentVolumeClaimSpec: 'accessModes=1 []s, selector=4 LabelSelector, resources=2 VolumeResourceRequirements, '
    + 'volumeName=3 s, storageClassName=5 s*, volumeMode=6 s*, dataSource=7 TypedLocalObjectReference, '
    + 'dataSourceRef=8 TypedObjectReference, volumeAttributesClassName=9 s*',
  VolumeResourceRequirements: 'limits=1 {}q, requests=2 {}q',
  ImageVolumeSource: 'reference=1 s, pullPolicy=2 s',

  // ---- core/v1: pod status ----
  PodStatus: 'phase=1 s, conditions=2 []PodCondition, message=3 s, reason=4 s, nominatedNodeName=11 s, hostIP=5 s, '
    + 'hostIPs=16 []HostIP, podIP=6 s, podIPs=12 []PodIP, startTime=7 t*, initContainerStatuses=10 []ContainerStatus, '
    + 'containerStatuses=8 []ContainerStatus, qosClass=9 s, ephemeralContainerStatuses=13 []ContainerStatus, resize=14 s, '
    + 'resourceClaimStatuses=15 []PodResourceClaimStatus',
  PodCondition: 'type=1 s*, status=2 s*, lastProbeTime=3 t, lastTransitionTime=4 t, reason=5 s, message=6 s',
  HostIP: 'ip=1 s*',
  PodIP: 'ip=1 s*',
  PodResourceClaimStatus: 'name=1 s*, resourceClaimName=2 s*',
  ContainerStatus: 'name=1 s*, state=2 ContainerState, lastState=3 ContainerState, ready=4 b*, restartCount=5 i32*, '
    + 'image=6 s*, imageID=7 s*, containerID=8 s, started=9 b*, allocatedResources=10 {}q, resources=11 ResourceRequirements, '
    + 'volumeMounts=12 []VolumeMountStatus, user=13 ContainerUser, allocatedResourcesStatus=14 []ResourceStatus',
  ContainerState: 'waiting=1 ContainerStateWaiting, running=2 ContainerStateRunning, terminated=3 ContainerStateTerminated',
  ContainerStateWaiting: 'reason=1 s, message=2 s',
  ContainerStateRunning: 'startedAt=1 t',
  ContainerStateTerminated: 'exitCode=1 i32*, signal=2 i32, reason=3 s, message=4 s, startedAt=5 t, finishedAt=6 t, '
    + 'containerID=7 s',
  VolumeMountStatus: 'name=1 s*, mountPath=2 s*, readOnly=3 b, recursiveReadOnly=4 s*',
  ContainerUser: 'linux=1 LinuxContainerUser',
  LinuxContainerUser: 'uid=1 i64*, gid=2 i64*, supplementalGroups=3 []i64',
  ResourceStatus: 'name=1 s*, resources=2 []ResourceHealth',
  ResourceHealth: 'resourceID=1 s*, health=2 s',

  // ---- batch/v1 ----
  Job: 'metadata=1 ObjectMeta, spec=2 JobSpec, status=3 JobStatus',
  JobSpec: 'parallelism=1 i32*, completions=2 i32*, activeDeadlineSeconds=3 i64*, podFailurePolicy=11 PodFailurePolicy, '
    + 'successPolicy=16 SuccessPolicy, backoffLimit=7 i32*, backoffLimitPerIndex=12 i32*, maxFailedIndexes=13 i32*, '
    + 'selector=4 LabelSelector, manualSelector=5 b*, template=6 PodTemplateSpec, ttlSecondsAfterFinished=8 i32*, '
    + 'completionMode=9 s*, suspend=10 b*, podReplacementPolicy=14 s*, managedBy=15 s*',
  JobStatus: 'conditions=1 []JobCondition, startTime=2 t*, completionTime=3 t*, active=4 i32, succeeded=5 i32, failed=6 i32, '
    + 'terminating=11 i32*, completedIndexes=7 s, failedIndexes=10 s*, uncountedTerminatedPods=8 UncountedTerminatedPods, '
    + 'ready=9 i32*',
  JobCondition: 'type=1 s*, status=2 s*, lastProbeTime=3 t, lastTransitionTime=4 t, reason=5 s, message=6 s',
  UncountedTerminatedPods: 'succeeded=1 []s, failed=2 []s',
  PodFailurePolicy: 'rules=1 []PodFailurePolicyRule',
  PodFailurePolicyRule: 'action=1 s*, onExitCodes=2 PodFailurePolicyOnExitCodesRequirement, '
    + 'onPodConditions=3 []PodFailurePolicyOnPodConditionsPattern',
  PodFailurePolicyOnExitCodesRequirement: 'containerName=1 s*, operator=2 s*, values=3 []i32',
  PodFailurePolicyOnPodConditionsPattern: 'type=1 s*, status=2 s*',
  SuccessPolicy: 'rules=1 []SuccessPolicyRule',
  SuccessPolicyRule: 'succeededIndexes=1 s*, succeededCount=2 i32*',

  // ---- authorization/v1 (kubectl auth can-i) ----
  SelfSubjectAccessReview: 'metadata=1 ObjectMeta, spec=2 SelfSubjectAccessReviewSpec, status=3 SubjectAccessReviewStatus',
  SelfSubjectAccessReviewSpec: 'resourceAttributes=1 ResourceAttributes, nonResourceAttributes=2 NonResourceAttributes',
  ResourceAttributes: 'namespace=1 s, verb=2 s, group=3 s, version=4 s, resource=5 s, subresource=6 s, name=7 s',
  NonResourceAttributes: 'path=1 s, verb=2 s',
  SubjectAccessReviewStatus: 'allowed=1 b*, denied=4 b, reason=2 s, evaluationError=3 s',

  // ---- coordination/v1 ----
  Lease: 'metadata=1 ObjectMeta, spec=2 LeaseSpec',
  LeaseSpec: 'holderIdentity=1 s*, leaseDurationSeconds=2 i32*, acquireTime=3 mt*, renewTime=4 mt*, leaseTransitions=5 i32*, '
    + 'strategy=6 s*, preferredHolder=7 s*',
};

/** The built-in kinds whose bodies are decoded; CustomResourceDefinition is not (see index.ts). */
export const DECODED_KINDS: readonly string[] = ['ConfigMap', 'Event', 'Job', 'Lease', 'Namespace', 'Pod', 'Secret', 'ServiceAccount'];
