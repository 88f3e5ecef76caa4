/*
 * HeteroSim: ns-3's own event rate on this machine (a reference for the models' event rates).
 *
 * Not part of the library: bench_scale.py --only events compiles it with cppyy after loading the
 * ns-3 libraries. RunSchedulerBenchmark(nEvents, inFlight, &wallS, &cpuS) starts inFlight events;
 * each schedules the next one a pseudo-random 1..1024 ns later until nEvents have run (the
 * scheduler then holds inFlight pending events, like a network with that many frames and timers
 * in flight), and returns the number of events executed. The simulator state is destroyed
 * before and after.
 */
#include <cstdint>

#include "ns3/nstime.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace ns3
{

namespace
{
/** State of one benchmark run. */
struct BenchState
{
    uint64_t left{0};    //!< events still to schedule
    uint64_t ran{0};     //!< events executed
    uint64_t rng{1};     //!< xorshift state
};

BenchState g_bench; //!< the running benchmark (the simulator is a singleton too)

/** One benchmark event: count it and schedule the next one. */
void
BenchEvent()
{
    ++g_bench.ran;
    if (g_bench.left == 0)
    {
        return;
    }
    --g_bench.left;
    g_bench.rng ^= g_bench.rng << 13;
    g_bench.rng ^= g_bench.rng >> 7;
    g_bench.rng ^= g_bench.rng << 17;
    Simulator::Schedule(NanoSeconds(1 + (g_bench.rng & 1023)), &BenchEvent);
}
} // namespace

uint64_t
RunSchedulerBenchmark(uint64_t nEvents, uint32_t inFlight, double* wallS, double* cpuS)
{
    Simulator::Destroy();
    uint64_t first = std::min<uint64_t>(std::max<uint32_t>(inFlight, 1), nEvents);
    g_bench = BenchState();
    g_bench.left = nEvents - first;
    g_bench.rng = 0x9E3779B97F4A7C15ULL;
    for (uint64_t i = 0; i < first; ++i)
    {
        Simulator::Schedule(NanoSeconds(1 + i % 1024), &BenchEvent);
    }
    auto wall0 = std::chrono::steady_clock::now();
    std::clock_t cpu0 = std::clock();
    Simulator::Run();
    std::clock_t cpu1 = std::clock();
    auto wall1 = std::chrono::steady_clock::now();
    *wallS = std::chrono::duration<double>(wall1 - wall0).count();
    *cpuS = static_cast<double>(cpu1 - cpu0) / CLOCKS_PER_SEC;
    uint64_t ran = g_bench.ran;
    Simulator::Destroy();
    return ran;
}

} // namespace ns3
