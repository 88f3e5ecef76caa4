/*
 * HeteroSim: free-list allocator for frame descriptors.
 */
#ifndef HETEROSIM_RDMA_FRAME_POOL_H
#define HETEROSIM_RDMA_FRAME_POOL_H

#include "rdma-frame.h"

#include "ns3/simple-ref-count.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace ns3
{

/**
 * \brief Hands out RdmaFrame descriptors from chunks and takes them back; no allocation once
 * the pool has grown to the number of frames in flight.
 */
class RdmaFramePool : public SimpleRefCount<RdmaFramePool>
{
  public:
    RdmaFramePool();

    /** \return a zeroed frame */
    RdmaFrame* Alloc();
    /** \param frame a frame from Alloc(), returned to the free list */
    void Free(RdmaFrame* frame);
    /** \return frames currently handed out */
    uint64_t GetInUse() const;
    /** \return frames ever created */
    uint64_t GetCapacity() const;

  private:
    static constexpr uint32_t CHUNK = 1024;             //!< frames per chunk
    std::vector<std::unique_ptr<RdmaFrame[]>> m_chunks; //!< storage
    RdmaFrame* m_free{nullptr};                         //!< free list head
    uint64_t m_inUse{0};                                //!< handed out
};

} // namespace ns3

#endif /* HETEROSIM_RDMA_FRAME_POOL_H */
