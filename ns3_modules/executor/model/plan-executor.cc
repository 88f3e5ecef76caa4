/*
 * HeteroSim: runs an execution plan (compute tasks, flows, markers with dependencies) on ns-3.
 */
#include "plan-executor.h"

#include "fluid-network.h"

#include "ns3/abort.h"
#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/nstime.h"
#include "ns3/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("PlanExecutor");
NS_OBJECT_ENSURE_REGISTERED(PlanExecutor);

namespace
{
/** Stall and cycle messages name at most this many tasks. */
constexpr uint32_t kMaxNamed = 5;
/** Completions between two wall-clock checks. */
constexpr uint32_t kWallCheckEvery = 512;

/**
 * Free a vector's memory (clear() keeps the capacity).
 * \param values the vector
 */
template <typename T>
void
FreeVector(std::vector<T>& values)
{
    std::vector<T>().swap(values);
}

/**
 * The first flow of each connection id seen so far: a vector for ids below a bound (ids are
 * dense in practice), a map for ids far above the task count.
 */
class FirstFlowOfConnection
{
  public:
    /** \param nTasks tasks of the plan (sets the bound of dense ids) */
    explicit FirstFlowOfConnection(uint32_t nTasks)
        : m_denseBound(static_cast<int64_t>(4) * nTasks + 1024)
    {
    }

    /**
     * \param connection connection id (0 .. 2^32 - 1)
     * \param task a flow on it
     * \return the first flow seen on \p connection (\p task if it is the first)
     */
    uint32_t
    Get(int64_t connection, uint32_t task)
    {
        if (connection >= m_denseBound)
        {
            return m_sparse.emplace(static_cast<uint32_t>(connection), task).first->second;
        }
        auto c = static_cast<std::size_t>(connection);
        if (c >= m_dense.size())
        {
            m_dense.resize(std::max<std::size_t>(c + 1, 2 * m_dense.size()), UINT32_MAX);
        }
        if (m_dense[c] == UINT32_MAX)
        {
            m_dense[c] = task;
        }
        return m_dense[c];
    }

  private:
    int64_t m_denseBound;                            //!< ids below it are stored densely
    std::vector<uint32_t> m_dense;                   //!< id -> first flow (UINT32_MAX: none)
    std::unordered_map<uint32_t, uint32_t> m_sparse; //!< id -> first flow, ids above the bound
};
} // namespace

TypeId
PlanExecutor::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PlanExecutor")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<PlanExecutor>()
            .AddAttribute("StopTime",
                          "Simulated time at which the run stops even if tasks remain (partial "
                          "results); 0 = run to the end",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PlanExecutor::m_stopTime),
                          MakeTimeChecker())
            .AddAttribute("ProgressInterval",
                          "Simulated time between two progress samples (tasks finished, flows "
                          "in flight); 0 = no samples",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PlanExecutor::m_progressInterval),
                          MakeTimeChecker())
            .AddAttribute("WallInterval",
                          "Wall-clock time after which Resume() returns so that the caller can "
                          "report progress; 0 = run without returning",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PlanExecutor::m_wallInterval),
                          MakeTimeChecker())
            .AddAttribute("StallTimeout",
                          "Simulated time without any task finishing after which the run is "
                          "reported as stalled; 0 = only when no event is left",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PlanExecutor::m_stallTimeout),
                          MakeTimeChecker())
            .AddTraceSource("TaskStart",
                            "A task started: task index",
                            MakeTraceSourceAccessor(&PlanExecutor::m_taskStartTrace),
                            "ns3::PlanExecutor::TaskCallback")
            .AddTraceSource("TaskDone",
                            "A task finished: task index",
                            MakeTraceSourceAccessor(&PlanExecutor::m_taskDoneTrace),
                            "ns3::PlanExecutor::TaskCallback");
    return tid;
}

PlanExecutor::PlanExecutor()
{
    NS_LOG_FUNCTION(this);
}

PlanExecutor::~PlanExecutor()
{
    NS_LOG_FUNCTION(this);
}

void
PlanExecutor::SetNetwork(Ptr<FlowNetwork> network)
{
    m_validated = false; // its GPU count and routes are checked
    m_network = network;
    m_network->SetFlowDoneCallback(MakeCallback(&PlanExecutor::OnFlowDone, this));
}

void
PlanExecutor::SetTopology(Ptr<TopologyDescription> topo)
{
    m_validated = false;
    m_topo = topo;
}

void
PlanExecutor::SetComputeContention(Ptr<ComputeContention> contention)
{
    m_contention = contention;
}

void
PlanExecutor::SetComputeSlowdown(Ptr<ComputeSlowdown> slowdown)
{
    m_slowdown = slowdown;
}

void
PlanExecutor::LoadPlan(uint32_t n,
                       const uint8_t* kind,
                       const int32_t* gpu,
                       const int32_t* dst,
                       const int64_t* bytes,
                       const int64_t* durationNs,
                       const int64_t* delayNs,
                       const int16_t* stream,
                       const uint8_t* priority,
                       const int64_t* depPtr,
                       const int64_t* depIdx)
{
    NS_LOG_FUNCTION(this << n);
    int64_t edges = n > 0 ? std::max<int64_t>(depPtr[n], 0) : 0;
    m_owned.kind.assign(kind, kind + n);
    m_owned.gpu.assign(gpu, gpu + n);
    m_owned.dst.assign(dst, dst + n);
    m_owned.bytes.assign(bytes, bytes + n);
    m_owned.duration.assign(durationNs, durationNs + n);
    m_owned.delay.assign(delayNs, delayNs + n);
    m_owned.stream.assign(stream, stream + n);
    m_owned.priority.assign(priority, priority + n);
    m_owned.depPtr.assign(depPtr, depPtr + n + 1);
    m_owned.depIdx.assign(depIdx, depIdx + edges);
    UsePlan(n,
            m_owned.kind.data(),
            m_owned.gpu.data(),
            m_owned.dst.data(),
            m_owned.bytes.data(),
            m_owned.duration.data(),
            m_owned.delay.data(),
            m_owned.stream.data(),
            m_owned.priority.data(),
            m_owned.depPtr.data(),
            m_owned.depIdx.data());
}

void
PlanExecutor::BorrowPlan(uint32_t n,
                         const uint8_t* kind,
                         const int32_t* gpu,
                         const int32_t* dst,
                         const int64_t* bytes,
                         const int64_t* durationNs,
                         const int64_t* delayNs,
                         const int16_t* stream,
                         const uint8_t* priority,
                         const int64_t* depPtr,
                         const int64_t* depIdx)
{
    NS_LOG_FUNCTION(this << n);
    m_owned = OwnedPlan();
    UsePlan(n, kind, gpu, dst, bytes, durationNs, delayNs, stream, priority, depPtr, depIdx);
}

void
PlanExecutor::BorrowPlanNarrow(uint32_t n,
                               const uint8_t* kind,
                               const int32_t* gpu,
                               const int32_t* dst,
                               const int32_t* bytes,
                               const int32_t* durationNs,
                               const int32_t* delayNs,
                               const int16_t* stream,
                               const uint8_t* priority,
                               const int64_t* depPtr,
                               const int64_t* depIdx)
{
    NS_LOG_FUNCTION(this << n);
    m_owned = OwnedPlan();
    UsePlan(n, kind, gpu, dst, nullptr, nullptr, nullptr, stream, priority, depPtr, depIdx);
    m_bytes.narrow = {bytes, n};
    m_duration.narrow = {durationNs, n};
    m_delay.narrow = {delayNs, n};
}

void
PlanExecutor::UsePlan(uint32_t n,
                      const uint8_t* kind,
                      const int32_t* gpu,
                      const int32_t* dst,
                      const int64_t* bytes,
                      const int64_t* durationNs,
                      const int64_t* delayNs,
                      const int16_t* stream,
                      const uint8_t* priority,
                      const int64_t* depPtr,
                      const int64_t* depIdx)
{
    m_borrowStart = {}; // times borrowed for a previous plan
    m_borrowEnd = {};
    m_borrowStart32 = {};
    m_borrowEnd32 = {};
    // null: given in 32 bits next (BorrowParentsNarrow)
    int64_t edges = n > 0 && depPtr ? std::max<int64_t>(depPtr[n], 0) : 0;
    m_n = n;
    m_kind = {kind, n};
    // null: given in 16 bits next (BorrowEndpointsNarrow)
    m_gpu = {gpu ? std::span<const int32_t>(gpu, n) : std::span<const int32_t>(), {}};
    m_dst = {dst ? std::span<const int32_t>(dst, n) : std::span<const int32_t>(), {}};
    // null: given in 32 bits (BorrowPlanNarrow)
    m_bytes = {bytes ? std::span<const int64_t>(bytes, n) : std::span<const int64_t>(), {}};
    m_duration = {durationNs ? std::span<const int64_t>(durationNs, n) : std::span<const int64_t>(),
                  {}};
    m_delay = {delayNs ? std::span<const int64_t>(delayNs, n) : std::span<const int64_t>(), {}};
    m_stream = {stream, n};
    m_priority = {priority, n};
    m_depPtr = {};
    m_depIdx = {};
    if (depPtr)
    {
        m_depPtr.wide = {depPtr, static_cast<std::size_t>(n) + 1};
        m_depIdx.wide = {depIdx, static_cast<std::size_t>(edges)};
    }
    FreeVector(m_owned.connection);
    m_connection = {}; // every flow on its own until SetConnections
    m_validated = false;
    m_runState = NOT_STARTED;
    m_error.clear();
}

void
PlanExecutor::BorrowEndpointsNarrow(uint32_t n, const int16_t* gpu, const int16_t* dst)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "BorrowEndpointsNarrow: " << n << " tasks, but the plan has " << m_n);
    FreeVector(m_owned.gpu);
    FreeVector(m_owned.dst);
    m_gpu = {{}, {gpu, n}};
    m_dst = {{}, {dst, n}};
    m_validated = false;
}

void
PlanExecutor::BorrowParentsNarrow(uint32_t n, const int32_t* depPtr, const int32_t* depIdx)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "BorrowParentsNarrow: " << n << " tasks, but the plan has " << m_n);
    FreeVector(m_owned.depPtr);
    FreeVector(m_owned.depIdx);
    int64_t edges = n > 0 ? std::max<int32_t>(depPtr[n], 0) : 0;
    m_depPtr = {{}, {depPtr, static_cast<std::size_t>(n) + 1}};
    m_depIdx = {{}, {depIdx, static_cast<std::size_t>(edges)}};
    m_validated = false;
}

void
PlanExecutor::SetConnections(uint32_t n, const int64_t* connection)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "SetConnections: " << n << " tasks, but the plan has " << m_n);
    m_owned.connection.assign(connection, connection + n);
    m_connection = {m_owned.connection, {}};
    m_validated = false;
}

void
PlanExecutor::BorrowConnections(uint32_t n, const int64_t* connection)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "BorrowConnections: " << n << " tasks, but the plan has " << m_n);
    FreeVector(m_owned.connection);
    m_connection = {{connection, n}, {}};
    m_validated = false;
}

void
PlanExecutor::BorrowConnectionsNarrow(uint32_t n, const int32_t* connection)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n,
                    "BorrowConnectionsNarrow: " << n << " tasks, but the plan has " << m_n);
    FreeVector(m_owned.connection);
    m_connection = {{}, {connection, n}};
    m_validated = false;
}

void
PlanExecutor::BorrowTimes(uint32_t n, int64_t* start, int64_t* end)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "BorrowTimes: " << n << " tasks, but the plan has " << m_n);
    m_borrowStart = {start, n};
    m_borrowEnd = {end, n};
    m_borrowStart32 = {};
    m_borrowEnd32 = {};
}

void
PlanExecutor::BorrowTimesNarrow(uint32_t n, int32_t* start, int32_t* end)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "BorrowTimesNarrow: " << n << " tasks, but the plan has " << m_n);
    m_borrowStart32 = {start, n};
    m_borrowEnd32 = {end, n};
    m_borrowStart = {};
    m_borrowEnd = {};
}

bool
PlanExecutor::NarrowTimesFull() const
{
    return m_timesFull;
}

void
PlanExecutor::WidenTimes(uint32_t n, int64_t* start, int64_t* end)
{
    NS_LOG_FUNCTION(this << n);
    NS_ABORT_MSG_IF(n != m_n, "WidenTimes: " << n << " tasks, but the plan has " << m_n);
    MoveTimes(start, end);
    FreeVector(m_ownTimes);
    m_borrowStart = {start, n};
    m_borrowEnd = {end, n};
    m_borrowStart32 = {};
    m_borrowEnd32 = {};
}

void
PlanExecutor::MoveTimes(int64_t* start, int64_t* end)
{
    // from the last task down: \p start may be the memory of the 32-bit start array itself
    // (value i in 64 bits covers 32-bit values 2i and 2i + 1, both read by then), as \p end
    for (uint32_t i = m_n; i-- > 0;)
    {
        start[i] = i < m_start.size() ? m_start.Get(i) : -1;
        end[i] = i < m_end.size() ? m_end.Get(i) : -1;
    }
    m_start = {{start, m_n}, {}, {}};
    m_end = {{end, m_n}, {}, {}};
    m_timesFull = false;
}

void
PlanExecutor::SetTime(TimeColumn& column, uint32_t t, int64_t ns)
{
    if (!column.Set(t, ns) && !m_timesFull)
    {
        m_timesFull = true; // return to the caller, which widens the times (WidenTimes)
        m_yield = true;
        Simulator::Stop();
    }
}

int64_t
PlanExecutor::ConnectionOf(uint32_t task) const
{
    return m_connection.wide.empty() && m_connection.narrow.empty() ? -1 : m_connection[task];
}

bool
PlanExecutor::Validate()
{
    NS_LOG_FUNCTION(this);
    m_validated = false;
    if (!m_network)
    {
        m_error = "no network set";
        return false;
    }
    m_error = CheckTasks();
    if (m_error.empty())
    {
        m_error = CheckDependencyArrays();
    }
    if (!m_error.empty())
    {
        return false;
    }
    BuildChildren();
    m_error = CheckAcyclic();
    if (!m_error.empty())
    {
        return false;
    }
    NumberComputeStreams();
    m_validated = true;
    return true;
}

std::string
PlanExecutor::CheckTasks() const
{
    if (m_gpu.size() != m_n || m_dst.size() != m_n)
    {
        return "the plan's GPU columns were not given (BorrowEndpointsNarrow)";
    }
    int64_t nGpus = m_network->GetNGpus();
    std::unordered_set<uint64_t> checkedPairs; // (source, destination) GPU pairs routed
    FirstFlowOfConnection firstFlow(m_n);
    for (uint32_t i = 0; i < m_n; ++i)
    {
        std::string err = CheckTaskFields(i, nGpus);
        if (!err.empty())
        {
            return err;
        }
        if (m_kind[i] != FLOW)
        {
            continue;
        }
        std::ostringstream out;
        uint64_t pair = (static_cast<uint64_t>(m_gpu[i]) << 32) | static_cast<uint32_t>(m_dst[i]);
        if (m_topo && checkedPairs.insert(pair).second &&
            m_topo->GetPath(m_gpu[i], m_dst[i], 0).empty())
        {
            out << "task " << i << ": flow from GPU " << m_gpu[i] << " to GPU " << m_dst[i]
                << " is unreachable (no route in the topology)";
            return out.str();
        }
        int64_t c = ConnectionOf(i);
        if (c > static_cast<int64_t>(UINT32_MAX))
        {
            out << "task " << i << ": connection id " << c << " is larger than 2^32 - 1";
            return out.str();
        }
        if (c < 0)
        {
            continue;
        }
        uint32_t j = firstFlow.Get(c, i);
        if (j != i &&
            (m_gpu[j] != m_gpu[i] || m_dst[j] != m_dst[i] || m_priority[j] != m_priority[i]))
        {
            out << "task " << i << ": connection " << c << " joins flows " << j << " and " << i
                << " with different GPUs or priorities";
            return out.str();
        }
    }
    return "";
}

std::string
PlanExecutor::CheckTaskFields(uint32_t i, int64_t nGpus) const
{
    std::ostringstream err;
    uint8_t k = m_kind[i];
    if (k > MARKER)
    {
        err << "task " << i << ": unknown kind " << +k << " (expected 0 compute, 1 flow, 2 marker)";
    }
    else if (m_delay[i] < 0)
    {
        err << "task " << i << ": negative delay " << m_delay[i] << " ns";
    }
    else if (k == COMPUTE)
    {
        if (m_gpu[i] < 0 || m_gpu[i] >= nGpus)
        {
            err << "task " << i << ": compute task on GPU " << m_gpu[i] << ", but the cluster has "
                << nGpus << " GPUs";
        }
        else if (m_duration[i] < 0 || m_stream[i] < 0)
        {
            err << "task " << i << ": negative duration or stream";
        }
    }
    else if (k == FLOW)
    {
        if (m_gpu[i] < 0 || m_gpu[i] >= nGpus || m_dst[i] < 0 || m_dst[i] >= nGpus)
        {
            err << "task " << i << ": flow from GPU " << m_gpu[i] << " to GPU " << m_dst[i]
                << ", but the cluster has " << nGpus << " GPUs";
        }
        else if (m_gpu[i] == m_dst[i])
        {
            err << "task " << i << ": flow from GPU " << m_gpu[i] << " to itself";
        }
        else if (m_bytes[i] <= 0)
        {
            err << "task " << i << ": flow of " << m_bytes[i] << " bytes (expected > 0)";
        }
    }
    else if (ConnectionOf(i) >= 0)
    {
        err << "task " << i << ": only flows have a connection";
    }
    return err.str();
}

std::string
PlanExecutor::CheckDependencyArrays() const
{
    std::ostringstream err;
    if (m_depPtr.size() != static_cast<std::size_t>(m_n) + 1)
    {
        err << "the dependency lists were released (ReleaseParents); load the plan again";
        return err.str();
    }
    if (m_depPtr[0] != 0 || m_depPtr[m_n] != static_cast<int64_t>(m_depIdx.size()))
    {
        err << "dependency offsets do not match the dependency list";
        return err.str();
    }
    if (m_depIdx.size() > std::numeric_limits<uint32_t>::max())
    {
        // the children CSR (BuildChildren) indexes dependencies with 32 bits
        err << m_depIdx.size() << " dependencies (at most " << std::numeric_limits<uint32_t>::max()
            << ")";
        return err.str();
    }
    for (uint32_t i = 0; i < m_n; ++i)
    {
        if (m_depPtr[i + 1] < m_depPtr[i])
        {
            err << "task " << i << ": dependency offsets decrease";
            return err.str();
        }
        if (m_depPtr[i + 1] > static_cast<int64_t>(m_depIdx.size()))
        {
            err << "task " << i << ": dependency offsets run past the dependency list";
            return err.str();
        }
        for (int64_t e = m_depPtr[i]; e < m_depPtr[i + 1]; ++e)
        {
            int64_t p = m_depIdx[e];
            if (p < 0 || p >= m_n)
            {
                err << "task " << i << ": depends on task " << p << ", which does not exist";
                return err.str();
            }
        }
    }
    return "";
}

void
PlanExecutor::BuildChildren()
{
    m_childPtr.assign(m_n + 1, 0);
    for (uint32_t i = 0; i < m_n; ++i)
    {
        for (int64_t e = m_depPtr[i]; e < m_depPtr[i + 1]; ++e)
        {
            ++m_childPtr[m_depIdx[e] + 1];
        }
    }
    for (uint32_t i = 0; i < m_n; ++i)
    {
        m_childPtr[i + 1] += m_childPtr[i];
    }
    m_childIdx.assign(m_depIdx.size(), 0);
    // m_childPtr[p] is p's fill cursor (no copy of the offsets): it ends at p's end, the next
    // task's start, so the offsets are shifted back by one afterwards
    for (uint32_t i = 0; i < m_n; ++i)
    {
        for (int64_t e = m_depPtr[i]; e < m_depPtr[i + 1]; ++e)
        {
            m_childIdx[m_childPtr[m_depIdx[e]]++] = i;
        }
    }
    for (uint32_t i = m_n; i > 0; --i)
    {
        m_childPtr[i] = m_childPtr[i - 1];
    }
    m_childPtr[0] = 0;
}

std::string
PlanExecutor::CheckAcyclic()
{
    // Kahn's algorithm: every task must be reachable in a topological order. The unfinished
    // parents per task are counted in m_waiting (Start() counts them again) and the ready tasks
    // kept on a stack: no two more arrays of every task.
    std::vector<uint32_t>& left = m_waiting;
    left.assign(m_n, 0);
    std::vector<uint32_t> ready;
    for (uint32_t i = 0; i < m_n; ++i)
    {
        left[i] = m_depPtr[i + 1] - m_depPtr[i];
        if (left[i] == 0)
        {
            ready.push_back(i);
        }
    }
    std::size_t reached = 0;
    while (!ready.empty())
    {
        uint32_t u = ready.back();
        ready.pop_back();
        ++reached;
        for (uint32_t e = m_childPtr[u]; e < m_childPtr[u + 1]; ++e)
        {
            if (--left[m_childIdx[e]] == 0)
            {
                ready.push_back(m_childIdx[e]);
            }
        }
    }
    return reached < m_n ? DescribeCycle(left, m_n - reached) : std::string();
}

std::string
PlanExecutor::DescribeCycle(const std::vector<uint32_t>& left, std::size_t blocked) const
{
    // walk back through unfinished parents until a task repeats: that loop is a cycle
    uint32_t v = 0;
    while (left[v] == 0)
    {
        ++v;
    }
    std::vector<int64_t> seenAt(m_n, -1);
    std::vector<uint32_t> walk;
    while (seenAt[v] < 0)
    {
        seenAt[v] = walk.size();
        walk.push_back(v);
        for (int64_t e = m_depPtr[v]; e < m_depPtr[v + 1]; ++e)
        {
            if (left[m_depIdx[e]] > 0)
            {
                v = m_depIdx[e];
                break;
            }
        }
    }
    std::vector<uint32_t> cycle(walk.begin() + seenAt[v], walk.end());
    std::reverse(cycle.begin(), cycle.end()); // parent -> child order
    std::ostringstream err;
    err << "dependency cycle (" << blocked << " tasks can never start): task ";
    for (size_t i = 0; i < cycle.size() && i < 2 * kMaxNamed; ++i)
    {
        err << cycle[i] << " -> ";
    }
    err << (cycle.size() > 2 * kMaxNamed ? std::string("... -> ") : std::string()) << cycle[0];
    return err.str();
}

void
PlanExecutor::NumberComputeStreams()
{
    std::unordered_map<uint64_t, uint32_t> streams; // (GPU, stream) -> dense index
    for (uint32_t i = 0; i < m_n; ++i)
    {
        if (m_kind[i] == COMPUTE)
        {
            uint64_t key =
                (static_cast<uint64_t>(m_gpu[i]) << 16) | static_cast<uint16_t>(m_stream[i]);
            streams.emplace(key, streams.size()); // in order of first use
        }
    }
    m_nStreams = streams.size();
    m_gpuStreams.clear();
    m_denseStream.clear();
    for (const auto& [key, dense] : streams)
    {
        auto gpu = static_cast<std::size_t>(key >> 16);
        auto stream = static_cast<std::size_t>(key & 0xffff);
        if (gpu >= m_gpuStreams.size())
        {
            m_gpuStreams.resize(gpu + 1);
            m_denseStream.resize(gpu + 1);
        }
        m_gpuStreams[gpu].push_back(dense);
        if (stream >= m_denseStream[gpu].size())
        {
            m_denseStream[gpu].resize(stream + 1, 0);
        }
        m_denseStream[gpu][stream] = dense;
    }
    for (auto& list : m_gpuStreams)
    {
        std::sort(list.begin(), list.end());
    }
}

bool
PlanExecutor::Start()
{
    NS_LOG_FUNCTION(this);
    if (!m_validated && !Validate())
    {
        m_runState = INVALID;
        return false;
    }
    // parents per task, counted over the children CSR (the parents CSR may be released)
    m_waiting.assign(m_n, 0);
    for (uint32_t child : m_childIdx)
    {
        ++m_waiting[child];
    }
    m_state.assign(m_n, 0);
    m_timesFull = false;
    if (m_n > 0 && m_borrowStart32.size() == m_n && m_borrowEnd32.size() == m_n)
    {
        FreeVector(m_ownTimes);
        m_start = {{}, m_borrowStart32, {}};
        m_end = {{}, m_borrowEnd32, {}};
        std::fill(m_borrowStart32.begin(), m_borrowStart32.end(), -1);
        std::fill(m_borrowEnd32.begin(), m_borrowEnd32.end(), -1);
    }
    else
    {
        if (m_borrowStart.size() == m_n && m_borrowEnd.size() == m_n)
        {
            FreeVector(m_ownTimes);
            m_start = {m_borrowStart, {}, {}};
            m_end = {m_borrowEnd, {}, {}};
        }
        else
        {
            m_ownTimes.assign(2 * static_cast<std::size_t>(m_n), -1);
            m_start = {{m_ownTimes.data(), m_n}, {}, {}};
            m_end = {{m_ownTimes.data() + m_n, m_n}, {}, {}};
        }
        std::fill(m_start.wide.begin(), m_start.wide.end(), -1);
        std::fill(m_end.wide.begin(), m_end.wide.end(), -1);
    }
    m_queues.clear();
    m_queues.resize(m_nStreams);
    m_streamBusy.assign(m_nStreams, 0);
    m_running.assign(m_nStreams, Running{});
    m_completed.clear();
    m_kick.clear();
    m_done = 0;
    m_flowsInFlight = 0;
    m_makespan = 0;
    m_yield = false;
    m_stopHit = false;
    m_watchdogStall = false;
    m_watchdogDone = 0;
    m_sampleTime.clear();
    m_sampleDone.clear();
    m_sampleFlows.clear();
    m_nextSample = 0;
    m_lastYield = std::chrono::steady_clock::now();
    Simulator::ScheduleNow(&PlanExecutor::StartRoots, this);
    if (m_stopTime.IsStrictlyPositive())
    {
        Simulator::Schedule(m_stopTime, &PlanExecutor::StopTimeReached, this);
    }
    if (m_stallTimeout.IsStrictlyPositive())
    {
        Simulator::Schedule(m_stallTimeout, &PlanExecutor::Watchdog, this);
    }
    m_runState = YIELDED;
    return true;
}

int32_t
PlanExecutor::Resume()
{
    NS_LOG_FUNCTION(this);
    if (m_runState != YIELDED)
    {
        return m_runState;
    }
    if (m_timesFull)
    {
        // the caller did not widen the 32-bit times (WidenTimes): the executor's own hold them
        m_ownTimes.assign(2 * static_cast<std::size_t>(m_n), -1);
        MoveTimes(m_ownTimes.data(), m_ownTimes.data() + m_n);
        m_borrowStart32 = {};
        m_borrowEnd32 = {};
    }
    m_yield = false;
    m_lastYield = std::chrono::steady_clock::now();
    if (m_done < m_n)
    {
        Simulator::Run();
    }
    if (m_done == m_n)
    {
        SampleUntil(m_makespan, true);
        m_runState = FINISHED;
    }
    else if (m_yield)
    {
        m_runState = YIELDED;
    }
    else if (m_watchdogStall)
    {
        SampleUntil(Simulator::Now().GetNanoSeconds(), true);
        std::ostringstream out;
        out << "no task finished during the last " << m_stallTimeout.GetNanoSeconds()
            << " ns (StallTimeout); " << DescribeStall();
        m_error = out.str();
        m_runState = STALLED;
    }
    else if (m_stopHit)
    {
        SampleUntil(Simulator::Now().GetNanoSeconds(), true);
        m_runState = STOPPED;
    }
    else
    {
        SampleUntil(Simulator::Now().GetNanoSeconds(), true);
        m_error = DescribeStall();
        m_runState = STALLED;
    }
    return m_runState;
}

int32_t
PlanExecutor::Run()
{
    if (!Start())
    {
        return m_runState;
    }
    int32_t state;
    do
    {
        state = Resume();
    } while (state == YIELDED);
    return state;
}

void
PlanExecutor::StartRoots()
{
    for (uint32_t i = 0; i < m_n; ++i)
    {
        if (m_waiting[i] == 0)
        {
            Ready(i);
        }
    }
    Drain();
    if (m_n == 0)
    {
        Simulator::Stop();
    }
}

void
PlanExecutor::StopTimeReached()
{
    NS_LOG_FUNCTION(this);
    if (!Simulator::IsFinished())
    {
        m_stopHit = true; // otherwise nothing else is pending: Resume() reports the stall
    }
    Simulator::Stop();
}

void
PlanExecutor::Watchdog()
{
    if (m_done == m_n)
    {
        return;
    }
    if (m_done == m_watchdogDone)
    {
        m_watchdogStall = true;
        Simulator::Stop();
        return;
    }
    m_watchdogDone = m_done;
    Simulator::Schedule(m_stallTimeout, &PlanExecutor::Watchdog, this);
}

void
PlanExecutor::Ready(uint32_t task)
{
    if (m_delay[task] > 0)
    {
        m_state[task] = 1;
        Simulator::Schedule(NanoSeconds(m_delay[task]), &PlanExecutor::DelayedRelease, this, task);
    }
    else
    {
        Release(task);
    }
}

void
PlanExecutor::DelayedRelease(uint32_t task)
{
    Release(task);
    Drain();
}

void
PlanExecutor::Release(uint32_t task)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    switch (m_kind[task])
    {
    case COMPUTE: {
        uint32_t s = m_denseStream[m_gpu[task]][m_stream[task]];
        m_state[task] = 2;
        m_queues[s].push(task);
        m_kick.push_back(s);
        break;
    }
    case FLOW:
        m_state[task] = 3;
        SetTime(m_start, task, now);
        ++m_flowsInFlight;
        m_taskStartTrace(task);
        if (m_contention)
        {
            m_changedGpus.clear();
            m_contention->FlowStarted(task, m_gpu[task], m_dst[task], m_changedGpus);
            Retime(m_changedGpus);
        }
        if (ConnectionOf(task) >= 0)
        {
            m_network->StartFlowOnConnection(task,
                                             m_gpu[task],
                                             m_dst[task],
                                             m_bytes[task],
                                             m_priority[task],
                                             static_cast<uint32_t>(ConnectionOf(task)));
        }
        else
        {
            m_network->StartFlow(task, m_gpu[task], m_dst[task], m_bytes[task], m_priority[task]);
        }
        break;
    default:
        m_state[task] = 3;
        SetTime(m_start, task, now);
        m_taskStartTrace(task);
        m_completed.push_back(task);
        break;
    }
}

void
PlanExecutor::TryStartStream(uint32_t s)
{
    if (m_streamBusy[s] || m_queues[s].empty())
    {
        return;
    }
    uint32_t task = m_queues[s].top();
    m_queues[s].pop();
    m_streamBusy[s] = 1;
    m_state[task] = 3;
    int64_t now = Simulator::Now().GetNanoSeconds();
    SetTime(m_start, task, now);
    m_taskStartTrace(task);
    int64_t duration = m_duration[task];
    if (m_slowdown)
    {
        duration = m_slowdown->Stretch(m_gpu[task], now, duration);
    }
    if (!m_contention)
    {
        Simulator::Schedule(NanoSeconds(duration), &PlanExecutor::ComputeDone, this, s, task);
        return;
    }
    Running& run = m_running[s];
    run.task = task;
    run.nominalNs = duration;
    run.leftNs = static_cast<double>(duration);
    run.sinceNs = now;
    run.factor = m_contention->Factor(task, m_gpu[task]);
    ScheduleComputeEnd(s);
}

void
PlanExecutor::ScheduleComputeEnd(uint32_t s)
{
    Running& run = m_running[s];
    auto delay = static_cast<int64_t>(std::ceil(run.leftNs * run.factor - 1e-9));
    run.end = Simulator::Schedule(
        NanoSeconds(std::max<int64_t>(delay, 0)), &PlanExecutor::ComputeDone, this, s, run.task);
}

void
PlanExecutor::Retime(const std::vector<int32_t>& gpus)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    for (int32_t gpu : gpus)
    {
        if (gpu < 0 || static_cast<std::size_t>(gpu) >= m_gpuStreams.size())
        {
            continue;
        }
        for (uint32_t s : m_gpuStreams[gpu])
        {
            Running& run = m_running[s];
            if (!m_streamBusy[s] || !run.end.IsPending())
            {
                continue;
            }
            double factor = m_contention->Factor(run.task, gpu);
            run.leftNs =
                std::max(run.leftNs - static_cast<double>(now - run.sinceNs) / run.factor, 0.0);
            run.sinceNs = now;
            if (factor == run.factor)
            {
                continue;
            }
            run.factor = factor;
            run.end.Cancel();
            ScheduleComputeEnd(s);
        }
    }
}

void
PlanExecutor::ComputeDone(uint32_t stream, uint32_t task)
{
    if (m_contention)
    {
        int64_t now = Simulator::Now().GetNanoSeconds();
        m_contention->Finished(
            m_gpu[task], task, m_running[stream].nominalNs, now - m_start.Get(task));
    }
    m_streamBusy[stream] = 0;
    m_completed.push_back(task);
    m_kick.push_back(stream);
    Drain();
}

void
PlanExecutor::OnFlowDone(uint32_t flowId, Time when)
{
    NS_ASSERT_MSG(flowId < m_n && m_kind[flowId] == FLOW && m_state[flowId] == 3,
                  "network reported a flow that is not running: " << flowId);
    --m_flowsInFlight;
    if (m_contention)
    {
        m_changedGpus.clear();
        m_contention->FlowDone(flowId, m_gpu[flowId], m_dst[flowId], m_changedGpus);
        Retime(m_changedGpus);
    }
    m_completed.push_back(flowId);
    Drain();
}

void
PlanExecutor::Drain()
{
    if (m_draining)
    {
        return; // the outer call finishes the work
    }
    m_draining = true;
    int64_t now = Simulator::Now().GetNanoSeconds();
    size_t head = 0;
    while (true)
    {
        while (head < m_completed.size())
        {
            uint32_t t = m_completed[head++];
            SampleUntil(now, false);
            m_state[t] = 4;
            SetTime(m_end, t, now);
            m_makespan = std::max(m_makespan, now);
            ++m_done;
            m_taskDoneTrace(t);
            for (uint32_t e = m_childPtr[t]; e < m_childPtr[t + 1]; ++e)
            {
                uint32_t c = m_childIdx[e];
                if (--m_waiting[c] == 0)
                {
                    Ready(c);
                }
            }
        }
        if (m_kick.empty())
        {
            break;
        }
        // every task made ready at this instant is queued: now start streams in index order
        std::vector<uint32_t> kick;
        kick.swap(m_kick);
        for (uint32_t s : kick)
        {
            TryStartStream(s);
        }
    }
    m_sinceWallCheck += head;
    m_completed.clear();
    m_draining = false;
    if (m_done == m_n)
    {
        Simulator::Stop();
        return;
    }
    if (m_wallInterval.IsStrictlyPositive() && m_sinceWallCheck >= kWallCheckEvery)
    {
        m_sinceWallCheck = 0;
        auto now = std::chrono::steady_clock::now();
        if (now - m_lastYield >= std::chrono::nanoseconds(m_wallInterval.GetNanoSeconds()))
        {
            m_yield = true;
            Simulator::Stop();
        }
    }
}

void
PlanExecutor::SampleUntil(int64_t nowNs, bool inclusive)
{
    if (!m_progressInterval.IsStrictlyPositive())
    {
        return;
    }
    int64_t step = m_progressInterval.GetNanoSeconds();
    while (m_nextSample < nowNs || (inclusive && m_nextSample == nowNs))
    {
        m_sampleTime.push_back(m_nextSample);
        m_sampleDone.push_back(m_done);
        m_sampleFlows.push_back(m_flowsInFlight);
        m_nextSample += step;
    }
}

void
PlanExecutor::DescribeTask(uint32_t t, std::ostream& out) const
{
    out << "task " << t;
    switch (m_kind[t])
    {
    case COMPUTE:
        out << " (compute on GPU " << m_gpu[t] << " stream " << m_stream[t] << ")";
        break;
    case FLOW:
        out << " (flow GPU " << m_gpu[t] << " -> GPU " << m_dst[t] << ", " << m_bytes[t]
            << " bytes)";
        break;
    default:
        out << " (marker)";
        break;
    }
    switch (m_state[t])
    {
    case 0:
        out << " waits for " << m_waiting[t] << " unfinished parent(s)";
        break;
    case 1:
        out << " is delayed";
        break;
    case 2:
        out << " is queued on its stream";
        break;
    default:
        out << " started at " << m_start.Get(t) << " ns and never finished";
        break;
    }
}

std::string
PlanExecutor::DescribeStall() const
{
    std::ostringstream out;
    out << "plan stalled at " << Simulator::Now().GetNanoSeconds() << " ns"
        << (m_watchdogStall ? "" : " with no event left") << ": " << (m_n - m_done) << " of " << m_n
        << " tasks unfinished";
    // name the tasks that are stuck in progress first: they are where the run got stuck
    std::vector<uint32_t> named;
    for (uint32_t state : {3u, 2u, 1u, 0u})
    {
        for (uint32_t t = 0; t < m_n && named.size() < kMaxNamed; ++t)
        {
            if (m_state[t] == state)
            {
                named.push_back(t);
            }
        }
        if (!named.empty())
        {
            break;
        }
    }
    for (uint32_t t : named)
    {
        out << "; ";
        DescribeTask(t, out);
    }
    return out.str();
}

std::string
PlanExecutor::GetError() const
{
    return m_error;
}

uint32_t
PlanExecutor::GetNTasks() const
{
    return m_n;
}

uint64_t
PlanExecutor::GetTasksDone() const
{
    return m_done;
}

uint64_t
PlanExecutor::GetFlowsInFlight() const
{
    return m_flowsInFlight;
}

int64_t
PlanExecutor::GetMakespanNs() const
{
    return m_makespan;
}

void
PlanExecutor::CopyTimes(int64_t* start, int64_t* end) const
{
    for (uint32_t i = 0; i < m_n; ++i)
    {
        start[i] = i < m_start.size() ? m_start.Get(i) : -1;
        end[i] = i < m_end.size() ? m_end.Get(i) : -1;
    }
}

uint32_t
PlanExecutor::GetNSamples() const
{
    return m_sampleTime.size();
}

void
PlanExecutor::CopySamples(int64_t* timeNs, uint64_t* tasksDone, uint64_t* flowsInFlight) const
{
    std::copy(m_sampleTime.begin(), m_sampleTime.end(), timeNs);
    std::copy(m_sampleDone.begin(), m_sampleDone.end(), tasksDone);
    std::copy(m_sampleFlows.begin(), m_sampleFlows.end(), flowsInFlight);
}

bool
PlanExecutor::ReleaseParents()
{
    NS_LOG_FUNCTION(this);
    if (!m_validated)
    {
        return false;
    }
    m_depPtr = {};
    m_depIdx = {};
    FreeVector(m_owned.depPtr);
    FreeVector(m_owned.depIdx);
    return true;
}

void
PlanExecutor::ReleaseTasks()
{
    NS_LOG_FUNCTION(this << m_n);
    if (m_runState == YIELDED)
    {
        m_runState = STOPPED; // abandoned between two Resume() calls: it cannot go on
    }
    m_owned = OwnedPlan();
    m_kind = {};
    m_gpu = {};
    m_dst = {};
    m_bytes = {};
    m_duration = {};
    m_delay = {};
    m_stream = {};
    m_priority = {};
    m_connection = {};
    m_depPtr = {};
    m_depIdx = {};
    FreeVector(m_childPtr);
    FreeVector(m_childIdx);
    FreeVector(m_denseStream);
    FreeVector(m_waiting);
    FreeVector(m_state);
    m_start = {};
    m_end = {};
    m_borrowStart = {};
    m_borrowEnd = {};
    m_borrowStart32 = {};
    m_borrowEnd32 = {};
    m_timesFull = false;
    FreeVector(m_ownTimes);
    FreeVector(m_queues);
    FreeVector(m_running);
    FreeVector(m_completed);
    m_n = 0;
    m_validated = false;
    ReturnFreedMemory(); // the per-task tables, freed, go back for the readout
}

void
PlanExecutor::DoDispose()
{
    if (m_network)
    {
        m_network->SetFlowDoneCallback(MakeNullCallback<void, uint32_t, Time>());
    }
    m_network = nullptr;
    m_topo = nullptr;
    m_slowdown = nullptr;
    m_contention = nullptr;
    Object::DoDispose();
}

} // namespace ns3
