/*
 * HeteroSim: the two per-frame events of a QbbNetDevice, allocated from a free list.
 */
#include "qbb-device-event.h"

#include "qbb-net-device.h"

#include "ns3/assert.h"

#include <new>

namespace ns3
{

namespace
{

/** A free block; its storage is reused for the link. */
struct FreeBlock
{
    FreeBlock* next; //!< next free block
};

FreeBlock* g_freeBlocks = nullptr; //!< head of the free list
uint64_t g_live = 0;               //!< events handed out
uint64_t g_allocated = 0;          //!< blocks taken from the heap

} // namespace

QbbDeviceEvent::QbbDeviceEvent(QbbNetDevice* device, RdmaFrame* frame)
    : m_device(device)
    , m_frame(frame)
{
}

Ptr<EventImpl>
QbbDeviceEvent::Receive(QbbNetDevice* device, RdmaFrame* frame)
{
    return Ptr<EventImpl>(new QbbDeviceEvent(device, frame), false);
}

Ptr<EventImpl>
QbbDeviceEvent::TransmitComplete(QbbNetDevice* device)
{
    return Ptr<EventImpl>(new QbbDeviceEvent(device, nullptr), false);
}

void
QbbDeviceEvent::Notify()
{
    if (m_frame != nullptr)
    {
        m_device->Receive(m_frame);
    }
    else
    {
        m_device->TransmitComplete();
    }
}

void*
QbbDeviceEvent::operator new(std::size_t size)
{
    static_assert(sizeof(QbbDeviceEvent) >= sizeof(FreeBlock));
    NS_ASSERT_MSG(size == sizeof(QbbDeviceEvent), "QbbDeviceEvent is not meant to be derived");
    ++g_live;
    if (g_freeBlocks != nullptr)
    {
        FreeBlock* block = g_freeBlocks;
        g_freeBlocks = block->next;
        return block;
    }
    ++g_allocated;
    return ::operator new(size);
}

void
QbbDeviceEvent::operator delete(void* block)
{
    if (block == nullptr)
    {
        return;
    }
    --g_live;
    auto* free = static_cast<FreeBlock*>(block);
    free->next = g_freeBlocks;
    g_freeBlocks = free;
}

uint64_t
QbbDeviceEvent::GetLive()
{
    return g_live;
}

uint64_t
QbbDeviceEvent::GetAllocated()
{
    return g_allocated;
}

} // namespace ns3
