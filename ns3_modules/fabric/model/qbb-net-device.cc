/*
 * HeteroSim: a port of the RDMA fabric with per-priority egress queues and 802.1Qbb PFC.
 */
#include "qbb-net-device.h"

#include "qbb-device-event.h"

#include "ns3/assert.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("QbbNetDevice");
NS_OBJECT_ENSURE_REGISTERED(QbbNetDevice);

TypeId
QbbNetDevice::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::QbbNetDevice")
            .SetParent<NetDevice>()
            .SetGroupName("Heterosim")
            .AddConstructor<QbbNetDevice>()
            .AddAttribute("DataRate",
                          "Line rate of this direction of the link",
                          DataRateValue(DataRate("100Gbps")),
                          MakeDataRateAccessor(&QbbNetDevice::m_rate),
                          MakeDataRateChecker())
            .AddAttribute("PfcFrameBytes",
                          "Bytes a PFC frame occupies on the wire, bytes (64-byte minimum frame, "
                          "plus 20 bytes preamble and inter-frame gap when those are counted)",
                          UintegerValue(84),
                          MakeUintegerAccessor(&QbbNetDevice::m_pfcFrameBytes),
                          MakeUintegerChecker<uint32_t>(64))
            .AddTraceSource("Enqueue",
                            "A frame joined a data queue (frame, data queue bytes after)",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_enqueueTrace),
                            "ns3::QbbNetDevice::QueueTracedCallback")
            .AddTraceSource("Dequeue",
                            "A frame left a data queue for the wire (frame, bytes after)",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_dequeueTrace),
                            "ns3::QbbNetDevice::QueueTracedCallback")
            .AddTraceSource("Drop",
                            "A frame bound for this port was dropped",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_dropTrace),
                            "ns3::QbbNetDevice::FrameTracedCallback")
            .AddTraceSource("Mark",
                            "A frame leaving this port was ECN-marked",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_markTrace),
                            "ns3::QbbNetDevice::FrameTracedCallback")
            .AddTraceSource("Pause",
                            "A PFC frame was sent or received (priority, quanta, sent)",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_pauseTrace),
                            "ns3::QbbNetDevice::PauseTracedCallback")
            .AddTraceSource("LinkState",
                            "The port went down (false) or came back up (true) by a fault",
                            MakeTraceSourceAccessor(&QbbNetDevice::m_linkStateTrace),
                            "ns3::TracedValueCallback::Bool");
    return tid;
}

QbbNetDevice::QbbNetDevice()
{
    NS_LOG_FUNCTION(this);
}

QbbNetDevice::~QbbNetDevice()
{
    NS_LOG_FUNCTION(this);
}

void
QbbNetDevice::SetHandler(FrameHandler* handler, uint32_t port, RdmaFramePool* pool)
{
    m_handler = handler;
    m_port = port;
    m_pool = pool;
}

void
QbbNetDevice::Attach(Ptr<QbbChannel> channel)
{
    m_channel = channel;
    channel->Attach(this);
    m_rateBps = m_rate.GetBitRate();
    NS_ASSERT_MSG(m_rateBps > 0, "link rate must be positive");
}

uint64_t
QbbNetDevice::GetRateBps() const
{
    return m_rate.GetBitRate();
}

Time
QbbNetDevice::GetTxTime(uint32_t bytes) const
{
    uint64_t rate = m_rate.GetBitRate();
    uint64_t bits = static_cast<uint64_t>(bytes) * 8;
    return NanoSeconds(static_cast<int64_t>((bits * 1000000000ULL + rate - 1) / rate));
}

RdmaFrame*
QbbNetDevice::Pop(uint8_t q)
{
    Fifo& fifo = m_queue[q];
    RdmaFrame* frame = fifo.head;
    fifo.head = frame->next;
    if (fifo.head == nullptr)
    {
        fifo.tail = nullptr;
    }
    frame->next = nullptr;
    if (frame == m_lastPfc)
    {
        m_lastPfc = nullptr;
    }
    fifo.bytes -= frame->wireBytes;
    if (q != CONTROL_QUEUE)
    {
        UpdateQueueArea();
        m_dataQueueBytes -= frame->wireBytes;
        m_dequeueTrace(frame, m_dataQueueBytes);
    }
    return frame;
}

void
QbbNetDevice::UpdateQueueArea()
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    m_queueArea +=
        static_cast<double>(m_dataQueueBytes) * static_cast<double>(now - m_lastQueueChangeNs);
    m_lastQueueChangeNs = now;
}

void
QbbNetDevice::Enqueue(RdmaFrame* frame, uint8_t queue)
{
    NS_ASSERT(queue <= CONTROL_QUEUE);
    frame->next = nullptr;
    if (m_down)
    {
        FaultDrop(frame, queue != CONTROL_QUEUE);
        return;
    }
    Fifo& fifo = m_queue[queue];
    if (queue == CONTROL_QUEUE && frame->type == RdmaFrame::PFC)
    {
        // PFC frames go ahead of every other control frame but stay in order among
        // themselves: an XOFF decided after an XON still waiting here must reach the peer
        // after it, or the peer resumes while this side counts it as paused.
        RdmaFrame*& link = m_lastPfc != nullptr ? m_lastPfc->next : fifo.head;
        frame->next = link;
        link = frame;
        if (fifo.tail == nullptr || fifo.tail == m_lastPfc)
        {
            fifo.tail = frame;
        }
        m_lastPfc = frame;
    }
    else
    {
        if (fifo.tail != nullptr)
        {
            fifo.tail->next = frame;
        }
        else
        {
            fifo.head = frame;
        }
        fifo.tail = frame;
    }
    fifo.bytes += frame->wireBytes;
    if (queue != CONTROL_QUEUE)
    {
        UpdateQueueArea();
        m_dataQueueBytes += frame->wireBytes;
        m_maxQueueBytes = std::max(m_maxQueueBytes, m_dataQueueBytes);
        m_enqueueTrace(frame, m_dataQueueBytes);
    }
    TryTransmit();
}

void
QbbNetDevice::TryTransmit()
{
    if (m_busy || !m_channel || m_down)
    {
        return;
    }
    // Reserve the transmitter: dequeue hooks may queue frames on this device (re-entry).
    m_busy = true;
    RdmaFrame* frame = nullptr;
    if (m_queue[CONTROL_QUEUE].head != nullptr)
    {
        frame = Pop(CONTROL_QUEUE);
        m_handler->OnDequeue(frame, m_port);
    }
    else if (m_dataQueueBytes > 0)
    {
        for (uint8_t i = 0; i < N_PRIORITIES; ++i)
        {
            uint8_t p = (m_rr + i) % N_PRIORITIES;
            if (!m_paused[p] && m_queue[p].head != nullptr)
            {
                frame = Pop(p);
                m_rr = (p + 1) % N_PRIORITIES;
                m_handler->OnDequeue(frame, m_port);
                break;
            }
        }
    }
    if (frame == nullptr)
    {
        frame = m_handler->PullFrame(m_port);
    }
    if (frame == nullptr)
    {
        m_busy = false;
        if (m_queue[CONTROL_QUEUE].head != nullptr)
        {
            TryTransmit();
        }
        return;
    }
    NS_ASSERT_MSG(!frame->IsData() || !m_paused[frame->priority],
                  "a paused priority was offered for transmission");
    StartTransmission(frame);
}

void
QbbNetDevice::StartTransmission(RdmaFrame* frame)
{
    uint64_t num = static_cast<uint64_t>(frame->wireBytes) * 8 * 1000000000ULL + m_txCarry;
    int64_t ns = static_cast<int64_t>(num / m_rateBps);
    m_txCarry = num % m_rateBps;
    Time txTime = NanoSeconds(ns);
    m_txBytes += frame->wireBytes;
    ++m_txFrames;
    Simulator::Schedule(txTime, QbbDeviceEvent::TransmitComplete(this));
    m_channel->Transmit(frame, this, txTime);
}

void
QbbNetDevice::TransmitComplete()
{
    m_busy = false;
    TryTransmit();
}

void
QbbNetDevice::Receive(RdmaFrame* frame)
{
    if (m_lastDownNs >= 0 || m_lossProbability > 0)
    {
        int64_t now = Simulator::Now().GetNanoSeconds();
        int64_t sentNs = now - m_channel->GetDelay().GetNanoSeconds() -
                         GetTxTime(frame->wireBytes).GetNanoSeconds();
        bool lostOnLink = m_down || (m_lastDownNs >= 0 && m_lastDownNs > sentNs);
        bool lostAtRandom = !lostOnLink && m_lossProbability > 0 && frame->type != RdmaFrame::PFC &&
                            m_lossRv->GetValue() < m_lossProbability;
        if (lostOnLink || lostAtRandom)
        {
            NS_LOG_DEBUG("frame lost on the link: " << (lostOnLink ? "link down" : "random loss"));
            FaultDrop(frame, false);
            return;
        }
    }
    if (frame->type != RdmaFrame::PFC)
    {
        m_handler->HandleFrame(frame, m_port);
        return;
    }
    uint8_t p = frame->priority;
    uint16_t quanta = frame->pfcQuanta;
    m_pool->Free(frame);
    m_pauseTrace(p, quanta, false);
    if (quanta == 0)
    {
        Resume(p);
        return;
    }
    ++m_pauseReceived;
    if (!m_paused[p])
    {
        m_paused[p] = true;
        if (m_nPaused++ == 0)
        {
            m_pausedSinceNs = Simulator::Now().GetNanoSeconds();
        }
    }
    m_resumeEvent[p].Cancel();
    uint64_t bits = static_cast<uint64_t>(quanta) * 512;
    uint64_t rate = m_rate.GetBitRate();
    Time expiry = NanoSeconds(static_cast<int64_t>((bits * 1000000000ULL + rate - 1) / rate));
    m_resumeEvent[p] = Simulator::Schedule(expiry, &QbbNetDevice::Resume, this, p);
}

void
QbbNetDevice::Resume(uint8_t priority)
{
    m_resumeEvent[priority].Cancel();
    if (!m_paused[priority])
    {
        return;
    }
    m_paused[priority] = false;
    if (--m_nPaused == 0)
    {
        m_pausedNs += Simulator::Now().GetNanoSeconds() - m_pausedSinceNs;
    }
    TryTransmit();
}

void
QbbNetDevice::SendPfc(uint8_t priority, uint16_t quanta)
{
    RdmaFrame* frame = m_pool->Alloc();
    frame->type = RdmaFrame::PFC;
    frame->priority = priority;
    frame->pfcQuanta = quanta;
    frame->wireBytes = m_pfcFrameBytes;
    if (quanta > 0)
    {
        ++m_pauseSent;
    }
    else
    {
        ++m_resumeSent;
    }
    m_pauseTrace(priority, quanta, true);
    Enqueue(frame, CONTROL_QUEUE);
}

bool
QbbNetDevice::IsPaused(uint8_t priority) const
{
    return m_paused[priority];
}

uint64_t
QbbNetDevice::GetQueueBytes(uint8_t queue) const
{
    return m_queue[queue].bytes;
}

uint64_t
QbbNetDevice::GetTotalQueueBytes() const
{
    return m_dataQueueBytes;
}

uint64_t
QbbNetDevice::GetTxBytes() const
{
    return m_txBytes;
}

uint64_t
QbbNetDevice::GetTxFrames() const
{
    return m_txFrames;
}

uint64_t
QbbNetDevice::GetMaxQueueBytes() const
{
    return m_maxQueueBytes;
}

double
QbbNetDevice::GetMeanQueueBytes() const
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (now <= 0)
    {
        return 0.0;
    }
    double area = m_queueArea + static_cast<double>(m_dataQueueBytes) *
                                    static_cast<double>(now - m_lastQueueChangeNs);
    return area / static_cast<double>(now);
}

uint64_t
QbbNetDevice::GetPauseSent() const
{
    return m_pauseSent;
}

uint64_t
QbbNetDevice::GetResumeSent() const
{
    return m_resumeSent;
}

uint64_t
QbbNetDevice::GetPauseReceived() const
{
    return m_pauseReceived;
}

int64_t
QbbNetDevice::GetPausedNs() const
{
    int64_t total = m_pausedNs;
    if (m_nPaused > 0)
    {
        total += Simulator::Now().GetNanoSeconds() - m_pausedSinceNs;
    }
    return total;
}

uint64_t
QbbNetDevice::GetEcnMarks() const
{
    return m_ecnMarks;
}

uint64_t
QbbNetDevice::GetDrops() const
{
    return m_drops;
}

uint64_t
QbbNetDevice::GetTrims() const
{
    return m_trims;
}

void
QbbNetDevice::AddFastForwardTraffic(uint64_t bytes, uint64_t frames)
{
    m_txBytes += bytes;
    m_txFrames += frames;
}

void
QbbNetDevice::AddFastForwardSignals(uint64_t marks, uint64_t pauses)
{
    m_ecnMarks += marks;
    m_pauseSent += pauses;
}

void
QbbNetDevice::AddMemoizedCounters(uint64_t pauseSent,
                                  uint64_t pauseReceived,
                                  int64_t pausedNs,
                                  uint64_t ecnMarks,
                                  uint64_t drops,
                                  double queueArea,
                                  uint64_t maxQueue)
{
    m_pauseSent += pauseSent;
    m_pauseReceived += pauseReceived;
    m_pausedNs += pausedNs;
    m_ecnMarks += ecnMarks;
    m_drops += drops;
    m_queueArea += queueArea;
    m_maxQueueBytes = std::max(m_maxQueueBytes, maxQueue);
}

void
QbbNetDevice::CountEcnMark(const RdmaFrame* frame)
{
    ++m_ecnMarks;
    m_markTrace(frame);
}

void
QbbNetDevice::CountDrop(const RdmaFrame* frame)
{
    ++m_drops;
    m_dropTrace(frame);
}

void
QbbNetDevice::CountTrim(const RdmaFrame* frame)
{
    ++m_trims;
}

void
QbbNetDevice::FaultDrop(RdmaFrame* frame, bool queued)
{
    if (queued && frame->IsData() && m_handler != nullptr)
    {
        m_handler->OnDequeue(frame, m_port); // release its buffer as if it had left
    }
    ++m_faultDrops;
    CountDrop(frame);
    m_pool->Free(frame);
}

void
QbbNetDevice::SetLinkDown(bool down)
{
    NS_LOG_FUNCTION(this << down);
    if (down == m_down)
    {
        return;
    }
    m_down = down;
    m_linkStateTrace(!down);
    if (!down)
    {
        TryTransmit();
        return;
    }
    m_lastDownNs = Simulator::Now().GetNanoSeconds();
    for (uint8_t q = 0; q <= CONTROL_QUEUE; ++q)
    {
        while (m_queue[q].head != nullptr)
        {
            RdmaFrame* frame = Pop(q);
            FaultDrop(frame, q != CONTROL_QUEUE);
        }
    }
    for (uint8_t p = 0; p < N_PRIORITIES; ++p)
    {
        Resume(p); // the peer's pauses end with the link
    }
}

bool
QbbNetDevice::IsLinkDown() const
{
    return m_down;
}

void
QbbNetDevice::SetRate(uint64_t rateBps)
{
    NS_LOG_FUNCTION(this << rateBps);
    NS_ASSERT_MSG(rateBps > 0, "link rate must be positive");
    m_rate = DataRate(rateBps);
    m_rateBps = rateBps;
    m_txCarry = 0;
}

void
QbbNetDevice::SetLossProbability(double probability, int64_t stream)
{
    NS_LOG_FUNCTION(this << probability << stream);
    m_lossProbability = probability;
    if (probability > 0 && !m_lossRv)
    {
        m_lossRv = CreateObject<UniformRandomVariable>();
        m_lossRv->SetStream(stream);
    }
}

uint64_t
QbbNetDevice::GetFaultDrops() const
{
    return m_faultDrops;
}

int32_t
QbbNetDevice::GetPeerNodeId() const
{
    if (!m_channel)
    {
        return -1;
    }
    for (std::size_t i = 0; i < m_channel->GetNDevices(); ++i)
    {
        Ptr<NetDevice> dev = m_channel->GetDevice(i);
        if (PeekPointer(dev) != this && dev->GetNode())
        {
            return static_cast<int32_t>(dev->GetNode()->GetId());
        }
    }
    return -1;
}

void
QbbNetDevice::SetIfIndex(const uint32_t index)
{
    m_ifIndex = index;
}

uint32_t
QbbNetDevice::GetIfIndex() const
{
    return m_ifIndex;
}

Ptr<Channel>
QbbNetDevice::GetChannel() const
{
    return m_channel;
}

void
QbbNetDevice::SetAddress(Address address)
{
    m_address = Mac48Address::ConvertFrom(address);
}

Address
QbbNetDevice::GetAddress() const
{
    return m_address;
}

bool
QbbNetDevice::SetMtu(const uint16_t mtu)
{
    m_mtu = mtu;
    return true;
}

uint16_t
QbbNetDevice::GetMtu() const
{
    return m_mtu;
}

bool
QbbNetDevice::IsLinkUp() const
{
    return m_channel != nullptr;
}

void
QbbNetDevice::AddLinkChangeCallback(Callback<void> callback)
{
}

bool
QbbNetDevice::IsBroadcast() const
{
    return false;
}

Address
QbbNetDevice::GetBroadcast() const
{
    return Mac48Address::GetBroadcast();
}

bool
QbbNetDevice::IsMulticast() const
{
    return false;
}

Address
QbbNetDevice::GetMulticast(Ipv4Address multicastGroup) const
{
    return Mac48Address::GetMulticast(multicastGroup);
}

Address
QbbNetDevice::GetMulticast(Ipv6Address addr) const
{
    return Mac48Address::GetMulticast(addr);
}

bool
QbbNetDevice::IsBridge() const
{
    return false;
}

bool
QbbNetDevice::IsPointToPoint() const
{
    return true;
}

bool
QbbNetDevice::Send(Ptr<Packet> packet, const Address& dest, uint16_t protocolNumber)
{
    return false;
}

bool
QbbNetDevice::SendFrom(Ptr<Packet> packet,
                       const Address& source,
                       const Address& dest,
                       uint16_t protocolNumber)
{
    return false;
}

Ptr<Node>
QbbNetDevice::GetNode() const
{
    return m_node;
}

void
QbbNetDevice::SetNode(Ptr<Node> node)
{
    m_node = node;
}

bool
QbbNetDevice::NeedsArp() const
{
    return false;
}

void
QbbNetDevice::SetReceiveCallback(NetDevice::ReceiveCallback cb)
{
}

void
QbbNetDevice::SetPromiscReceiveCallback(NetDevice::PromiscReceiveCallback cb)
{
}

bool
QbbNetDevice::SupportsSendFrom() const
{
    return false;
}

void
QbbNetDevice::DoDispose()
{
    for (auto& ev : m_resumeEvent)
    {
        ev.Cancel();
    }
    m_node = nullptr;
    m_channel = nullptr;
    m_handler = nullptr;
    m_lossRv = nullptr;
    NetDevice::DoDispose();
}

} // namespace ns3
