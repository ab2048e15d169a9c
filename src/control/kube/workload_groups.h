// Gangs derived from the workload that made the pods, for pods that name no group of their own
// (as KAI's pod-grouper derives one per owner kind; docs/kubernetes.md, "Workloads"):
//  - a JobSet (label jobset.sigs.k8s.io/jobset-name): every replicated Job's pods together,
//    sum(replicas x min(parallelism, completions)), read from the JobSet;
//  - a LeaderWorkerSet group (labels leaderworkerset.sigs.k8s.io/name and group-index): the
//    leader and its workers, annotation leaderworkerset.sigs.k8s.io/size, no object read;
//  - a RayCluster (label ray.io/cluster): the head and its workers, as KubeRay sizes the
//    groups it gives gang schedulers (each worker group's desired replicas, or minReplicas
//    when the cluster autoscales, times numOfHosts), read from the RayCluster;
//  - an Indexed batch/v1 Job (its pods carry a completion index): min(parallelism,
//    completions - succeeded), read from the Job. A NonIndexed Job's pods stay independent.
// A suspended Job (spec.suspend, as Kueue's users create them) of ours and not labelled for
// Kueue is admitted whole: Tessera places its parallelism's pods from its template, holds that
// room, and unsuspends it (job_admission.cc).
#pragma once

#include <nlohmann/json.hpp>

#include "backend/kube/field_mask.h"
#include "control/kube/kube_objects.h"

namespace tessera::kube {

// Set by the Job controller on an Indexed Job's pods only.
inline constexpr const char* kJobIndexAnnotation = "batch.kubernetes.io/job-completion-index";
inline constexpr const char* kJobSetNameLabel = "jobset.sigs.k8s.io/jobset-name";
inline constexpr const char* kJobSetUidLabel = "jobset.sigs.k8s.io/jobset-uid";
inline constexpr const char* kLwsNameLabel = "leaderworkerset.sigs.k8s.io/name";
inline constexpr const char* kLwsGroupIndexLabel = "leaderworkerset.sigs.k8s.io/group-index";
inline constexpr const char* kLwsSizeAnnotation = "leaderworkerset.sigs.k8s.io/size";
inline constexpr const char* kRayClusterLabel = "ray.io/cluster";

// The group of a pod that names none (p.group empty), from its owner's conventions: sets
// p.group, p.group_api and p.owner_uid (and, for a LeaderWorkerSet, p.min_member, or p.invalid
// when its size annotation is malformed). Leaves a pod of no known workload alone.
void derive_workload_group(const nlohmann::json& meta, const Labels& labels, const Labels& notes,
                           PodInfo& p);

// The owners as the group of their pods. Throw std::invalid_argument naming the field when the
// object cannot be read (no metadata.name).
PodGroupInfo parse_job(const nlohmann::json& job);
PodGroupInfo parse_jobset(const nlohmann::json& jobset);
PodGroupInfo parse_ray_cluster(const nlohmann::json& cluster);
// Exactly the fields each parser reads (the reflectors parse nothing else).
const FieldMask& job_fields();
const FieldMask& jobset_fields();
const FieldMask& ray_cluster_fields();

}  // namespace tessera::kube
