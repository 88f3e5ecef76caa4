/*
 * HeteroSim: the two per-frame events of a QbbNetDevice, allocated from a free list.
 */
#ifndef HETEROSIM_QBB_DEVICE_EVENT_H
#define HETEROSIM_QBB_DEVICE_EVENT_H

#include "rdma-frame.h"

#include "ns3/event-impl.h"
#include "ns3/ptr.h"

#include <cstddef>
#include <cstdint>

namespace ns3
{

class QbbNetDevice;

/**
 * \brief A frame arriving at a device, or a device's transmitter becoming free.
 *
 * These are most of a packet run's events (two per frame and hop). Scheduling them through
 * Simulator::Schedule(Time, Ptr<EventImpl>) with a class-specific allocator skips the two heap
 * allocations (the EventImpl and its bound std::function) of a MakeEvent-style event; the
 * blocks are recycled through a free list and never returned to the system. The simulator is
 * single-threaded, so the list is not locked.
 */
class QbbDeviceEvent final : public EventImpl
{
  public:
    /**
     * \param device the receiving device
     * \param frame the frame
     * \return an event calling device->Receive(frame)
     */
    static Ptr<EventImpl> Receive(QbbNetDevice* device, RdmaFrame* frame);
    /**
     * \param device the transmitting device
     * \return an event calling device->TransmitComplete()
     */
    static Ptr<EventImpl> TransmitComplete(QbbNetDevice* device);

    /** \return a block from the free list (or the heap when it is empty) */
    static void* operator new(std::size_t size);
    /** \param block returned to the free list */
    static void operator delete(void* block);

    /** \return events allocated and not yet freed */
    static uint64_t GetLive();
    /** \return blocks ever taken from the heap */
    static uint64_t GetAllocated();

  protected:
    void Notify() override;

  private:
    QbbDeviceEvent(QbbNetDevice* device, RdmaFrame* frame);

    QbbNetDevice* m_device; //!< target device
    RdmaFrame* m_frame;     //!< frame received, or nullptr for transmit-complete
};

} // namespace ns3

#endif /* HETEROSIM_QBB_DEVICE_EVENT_H */
