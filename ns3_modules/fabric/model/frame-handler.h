/*
 * HeteroSim: what a node behind a QbbNetDevice must provide.
 */
#ifndef HETEROSIM_FRAME_HANDLER_H
#define HETEROSIM_FRAME_HANDLER_H

#include "rdma-frame.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Interface between a QbbNetDevice and the node logic that owns it (a switch or an
 * RDMA endpoint). Ports are numbered by the owner.
 */
class FrameHandler
{
  public:
    virtual ~FrameHandler() = default;

    /**
     * \brief A data or control frame (never PFC: the device consumes those) arrived.
     * \param frame the frame; ownership passes to the handler
     * \param port the owner's index of the receiving device
     */
    virtual void HandleFrame(RdmaFrame* frame, uint32_t port) = 0;

    /**
     * \brief The device is idle and its queues are empty (or paused): offer a frame.
     *
     * RDMA endpoints build the next packet of an eligible queue pair here; the frame's
     * priority must not be paused on the device.
     * \param port the owner's index of the device
     * \return a frame to send now, or nullptr
     */
    virtual RdmaFrame*
    PullFrame(uint32_t port)
    {
        return nullptr;
    }

    /**
     * \brief A frame leaves one of the device's queues for the wire (dequeue hook: buffer
     * release, ECN marking at dequeue, INT stamping).
     * \param frame the frame
     * \param port the owner's index of the device
     */
    virtual void
    OnDequeue(RdmaFrame* frame, uint32_t port)
    {
    }
};

} // namespace ns3

#endif /* HETEROSIM_FRAME_HANDLER_H */
