/*
 * HeteroSim: free-list allocator for frame descriptors.
 */
#include "rdma-frame-pool.h"

#include "ns3/assert.h"

#include <cstring>

namespace ns3
{

RdmaFramePool::RdmaFramePool() = default;

RdmaFrame*
RdmaFramePool::Alloc()
{
    if (m_free == nullptr)
    {
        m_chunks.emplace_back(new RdmaFrame[CHUNK]);
        RdmaFrame* chunk = m_chunks.back().get();
        for (uint32_t i = 0; i < CHUNK; ++i)
        {
            chunk[i].next = m_free;
            m_free = &chunk[i];
        }
    }
    RdmaFrame* frame = m_free;
    m_free = frame->next;
    // Only the fixed part is cleared; INT records are valid up to nHops.
    std::memset(static_cast<void*>(frame), 0, offsetof(RdmaFrame, hops));
    ++m_inUse;
    return frame;
}

void
RdmaFramePool::Free(RdmaFrame* frame)
{
    NS_ASSERT(frame != nullptr && m_inUse > 0);
    frame->next = m_free;
    m_free = frame;
    --m_inUse;
}

uint64_t
RdmaFramePool::GetInUse() const
{
    return m_inUse;
}

uint64_t
RdmaFramePool::GetCapacity() const
{
    return static_cast<uint64_t>(m_chunks.size()) * CHUNK;
}

} // namespace ns3
