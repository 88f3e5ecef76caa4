/*
 * HeteroSim: straggler GPUs: compute that runs slower during time windows.
 */
#include "compute-slowdown.h"

#include "ns3/assert.h"
#include "ns3/log.h"

#include <cmath>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("ComputeSlowdown");
NS_OBJECT_ENSURE_REGISTERED(ComputeSlowdown);

TypeId
ComputeSlowdown::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::ComputeSlowdown")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<ComputeSlowdown>()
            .AddTraceSource("Slowed",
                            "A compute task was stretched by a window: GPU, nominal ns, actual ns",
                            MakeTraceSourceAccessor(&ComputeSlowdown::m_slowedTrace),
                            "ns3::ComputeSlowdown::SlowedCallback");
    return tid;
}

ComputeSlowdown::ComputeSlowdown()
{
    NS_LOG_FUNCTION(this);
}

void
ComputeSlowdown::SetWindows(uint32_t n,
                            const int32_t* gpu,
                            const int64_t* startNs,
                            const int64_t* endNs,
                            const double* factor)
{
    m_windows.clear();
    for (uint32_t i = 0; i < n; ++i)
    {
        NS_ASSERT_MSG(gpu[i] >= 0 && factor[i] > 0, "bad slowdown window " << i);
        if (static_cast<std::size_t>(gpu[i]) >= m_windows.size())
        {
            m_windows.resize(gpu[i] + 1);
        }
        m_windows[gpu[i]].push_back({startNs[i], endNs[i], factor[i]});
    }
}

int64_t
ComputeSlowdown::Stretch(int32_t gpu, int64_t startNs, int64_t nominalNs) const
{
    if (gpu < 0 || static_cast<std::size_t>(gpu) >= m_windows.size() || m_windows[gpu].empty())
    {
        return nominalNs;
    }
    double t = static_cast<double>(startNs);
    double work = static_cast<double>(nominalNs); // nominal ns still to do
    for (const Window& w : m_windows[gpu])
    {
        double end = w.end < 0 ? INFINITY : static_cast<double>(w.end);
        if (end <= t)
        {
            continue;
        }
        double start = static_cast<double>(w.start);
        if (t < start)
        {
            if (work <= start - t)
            {
                break; // finishes before the window opens
            }
            work -= start - t;
            t = start;
        }
        double fits = (end - t) / w.factor; // nominal work the rest of the window holds
        if (work <= fits)
        {
            t += work * w.factor;
            work = 0;
            break;
        }
        work -= fits;
        t = end;
    }
    t += work;
    int64_t actual = std::llround(t) - startNs;
    if (actual != nominalNs)
    {
        ++m_slowed;
        m_extraNs += actual - nominalNs;
        m_slowedTrace(gpu, nominalNs, actual);
    }
    return actual;
}

uint64_t
ComputeSlowdown::GetTasksSlowed() const
{
    return m_slowed;
}

int64_t
ComputeSlowdown::GetExtraNs() const
{
    return m_extraNs;
}

} // namespace ns3
