/*
 * HeteroSim: ns-3's own event rate on this machine (a reference for the models' event rates).
 */
#ifndef HETEROSIM_SCHEDULER_BENCHMARK_H
#define HETEROSIM_SCHEDULER_BENCHMARK_H

#include <cstdint>

namespace ns3
{

/**
 * \brief Bare Simulator::Schedule loop: the event rate of ns-3's default simulator and scheduler
 * with nothing else in the events.
 *
 * Starts \p inFlight events; each one, when it runs, schedules the next one a pseudo-random
 * 1..1024 ns later (so that the scheduler holds \p inFlight pending events, like a network
 * with that many frames and timers in flight), until \p nEvents have run. Destroys the
 * simulator state before and after.
 *
 * \param nEvents events to run
 * \param inFlight events pending at any time (>= 1)
 * \param wallS output: wall-clock seconds of Simulator::Run
 * \param cpuS output: CPU seconds of this process during Simulator::Run
 * \return the number of events executed
 */
uint64_t RunSchedulerBenchmark(uint64_t nEvents, uint32_t inFlight, double* wallS, double* cpuS);

} // namespace ns3

#endif /* HETEROSIM_SCHEDULER_BENCHMARK_H */
