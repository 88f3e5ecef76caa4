/*
 * HeteroSim: compute slowed by the communication kernels running beside it on the same GPU.
 */
#include "compute-contention.h"

#include "ns3/assert.h"
#include "ns3/double.h"
#include "ns3/log.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("ComputeContention");
NS_OBJECT_ENSURE_REGISTERED(ComputeContention);

TypeId
ComputeContention::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::ComputeContention")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<ComputeContention>()
            .AddAttribute("MaxShare",
                          "Largest share of a GPU the communication blocks can take from a "
                          "compute task (caps c * blockShare, so f stays finite)",
                          DoubleValue(0.9),
                          MakeDoubleAccessor(&ComputeContention::m_maxShare),
                          MakeDoubleChecker<double>(0.0, 0.99))
            .AddTraceSource("Contended",
                            "A compute task finished later than nominal because communication "
                            "kernels ran beside it: GPU, task, nominal ns, actual ns",
                            MakeTraceSourceAccessor(&ComputeContention::m_contendedTrace),
                            "ns3::ComputeContention::ContendedCallback");
    return tid;
}

ComputeContention::ComputeContention()
    : m_maxShare(0.9)
{
    NS_LOG_FUNCTION(this);
}

void
ComputeContention::SetComputeTerms(uint32_t n,
                                   const double* waveTerm,
                                   const double* blockShare,
                                   const int32_t* waveAbove)
{
    m_ownWave.assign(waveTerm, waveTerm + n);
    m_ownShare.assign(blockShare, blockShare + n);
    m_ownAbove.assign(waveAbove, waveAbove + n);
    m_wave = m_ownWave;
    m_share = m_ownShare;
    m_above = m_ownAbove;
    m_taskExtra.clear();
    m_nTasks = n;
}

void
ComputeContention::SetFlowBlocks(uint32_t n, const int32_t* blocks, const int32_t* instance)
{
    m_ownBlocks.assign(blocks, blocks + n);
    m_ownInstance.assign(instance, instance + n);
    m_blocks = {m_ownBlocks, {}};
    m_instance = m_ownInstance;
}

void
ComputeContention::BorrowComputeTerms(uint32_t n,
                                      const double* waveTerm,
                                      const double* blockShare,
                                      const int32_t* waveAbove)
{
    NS_LOG_FUNCTION(this << n);
    std::vector<double>().swap(m_ownWave);
    std::vector<double>().swap(m_ownShare);
    std::vector<int32_t>().swap(m_ownAbove);
    m_wave = {waveTerm, n};
    m_share = {blockShare, n};
    m_above = {waveAbove, n};
    m_taskExtra.clear();
    m_nTasks = n;
}

void
ComputeContention::BorrowFlowBlocks(uint32_t n, const int32_t* blocks, const int32_t* instance)
{
    NS_LOG_FUNCTION(this << n);
    std::vector<int32_t>().swap(m_ownBlocks);
    std::vector<int32_t>().swap(m_ownInstance);
    m_blocks = {{blocks, n}, {}};
    m_instance = {instance, n};
}

void
ComputeContention::BorrowFlowBlocksNarrow(uint32_t n,
                                          const uint8_t* blocks,
                                          const int32_t* instance)
{
    NS_LOG_FUNCTION(this << n);
    std::vector<int32_t>().swap(m_ownBlocks);
    std::vector<int32_t>().swap(m_ownInstance);
    m_blocks = {{}, {blocks, n}};
    m_instance = {instance, n};
}

void
ComputeContention::SetGpuCount(uint32_t gpus)
{
    m_gpuBlocks.assign(gpus, 0);
    m_active.assign(gpus, {});
    m_extraNs.assign(gpus, 0);
    m_slowed.assign(gpus, 0);
}

void
ComputeContention::Touch(uint32_t task, int32_t gpu, int delta, std::vector<int32_t>& changed)
{
    if (gpu < 0 || static_cast<std::size_t>(gpu) >= m_active.size() || task >= m_blocks.size())
    {
        return;
    }
    int64_t kernel = m_instance[task] >= 0 ? m_instance[task] : -static_cast<int64_t>(task) - 2;
    auto& flows = m_active[gpu];
    if (delta > 0)
    {
        if (flows[kernel]++ == 0)
        {
            m_gpuBlocks[gpu] += m_blocks[task];
            changed.push_back(gpu);
        }
        return;
    }
    auto it = flows.find(kernel);
    NS_ASSERT_MSG(it != flows.end() && it->second > 0, "flow " << task << " was not started");
    if (--it->second == 0)
    {
        flows.erase(it);
        m_gpuBlocks[gpu] -= m_blocks[task];
        changed.push_back(gpu);
    }
}

void
ComputeContention::FlowStarted(uint32_t task,
                               int32_t src,
                               int32_t dst,
                               std::vector<int32_t>& changed)
{
    Touch(task, src, +1, changed);
    if (dst != src)
    {
        Touch(task, dst, +1, changed);
    }
}

void
ComputeContention::FlowDone(uint32_t task, int32_t src, int32_t dst, std::vector<int32_t>& changed)
{
    Touch(task, src, -1, changed);
    if (dst != src)
    {
        Touch(task, dst, -1, changed);
    }
}

int64_t
ComputeContention::BlocksOn(int32_t gpu) const
{
    if (gpu < 0 || static_cast<std::size_t>(gpu) >= m_gpuBlocks.size())
    {
        return 0;
    }
    return m_gpuBlocks[gpu];
}

double
ComputeContention::Factor(uint32_t task, int32_t gpu) const
{
    int64_t c = BlocksOn(gpu);
    if (c <= 0 || task >= m_wave.size())
    {
        return 1.0;
    }
    double share = std::min(static_cast<double>(c) * m_share[task], m_maxShare);
    double tail = c > m_above[task] ? 1.0 + m_wave[task] : 1.0;
    return std::max(tail, 1.0 / (1.0 - share));
}

void
ComputeContention::Finished(int32_t gpu, uint32_t task, int64_t nominalNs, int64_t actualNs)
{
    if (actualNs <= nominalNs || gpu < 0 || static_cast<std::size_t>(gpu) >= m_extraNs.size())
    {
        return;
    }
    m_extraNs[gpu] += actualNs - nominalNs;
    ++m_slowed[gpu];
    if (task < m_nTasks)
    {
        m_taskExtra[task] = actualNs - nominalNs;
    }
    m_contendedTrace(gpu, task, nominalNs, actualNs);
}

const std::vector<int64_t>&
ComputeContention::GetExtraNs() const
{
    return m_extraNs;
}

const std::vector<uint64_t>&
ComputeContention::GetTasksSlowed() const
{
    return m_slowed;
}

const std::unordered_map<uint32_t, int64_t>&
ComputeContention::GetTaskExtraNs() const
{
    return m_taskExtra;
}

uint32_t
ComputeContention::GetNSlowedTasks() const
{
    return static_cast<uint32_t>(m_taskExtra.size());
}

void
ComputeContention::CopyAccounts(int64_t* extraNs,
                                uint64_t* slowed,
                                uint32_t* tasks,
                                int64_t* taskExtraNs) const
{
    std::copy(m_extraNs.begin(), m_extraNs.end(), extraNs);
    std::copy(m_slowed.begin(), m_slowed.end(), slowed);
    std::vector<std::pair<uint32_t, int64_t>> sorted(m_taskExtra.begin(), m_taskExtra.end());
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
    {
        tasks[i] = sorted[i].first;
        taskExtraNs[i] = sorted[i].second;
    }
}

void
ComputeContention::ReleaseTasks()
{
    NS_LOG_FUNCTION(this << m_wave.size());
    // swap with empty vectors: clear() keeps the capacity
    std::vector<double>().swap(m_ownWave);
    std::vector<double>().swap(m_ownShare);
    std::vector<int32_t>().swap(m_ownAbove);
    std::vector<int32_t>().swap(m_ownBlocks);
    std::vector<int32_t>().swap(m_ownInstance);
    m_wave = {};
    m_share = {};
    m_above = {};
    m_blocks = {};
    m_instance = {};
    std::unordered_map<uint32_t, int64_t>().swap(m_taskExtra);
    m_nTasks = 0;
}

} // namespace ns3
