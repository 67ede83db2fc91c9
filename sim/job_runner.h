// One rank of the simulated training job: the process that stands for one training process (one
// GPU), as NCCL runs them — a process per rank, so the records carry distinct pids. It loads the
// real profiler plugin, opens its communicator context, and at each iteration's end reports its
// collective through the plugin, which sends the record to the node's agent over its socket.
#ifndef RINGSIDE_SIM_JOB_RUNNER_H_
#define RINGSIDE_SIM_JOB_RUNNER_H_

#include <csignal>
#include <cstdint>
#include <string>

#include "sim/scenario.h"

namespace ringside::sim {

// Runs until the scenario's duration is over or `*stop` is set; returns an exit status.
int RunRankJob(const Scenario& scenario, int rank, const std::string& plugin,
               const std::string& socket, int64_t t0_ns, volatile std::sig_atomic_t* stop);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_JOB_RUNNER_H_
