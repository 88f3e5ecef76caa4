/*
 * HeteroSim: RDMA (RoCEv2) endpoint: queue-pair scheduler, transport and NP of a NIC or GPU.
 */
#include "rdma-nic.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/enum.h"
#include "ns3/log.h"
#include "ns3/shiftable-scheduler.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RdmaNic");
NS_OBJECT_ENSURE_REGISTERED(RdmaNic);

namespace
{
/**
 * The ECMP hash of a UET data packet: the flow's header hash mixed with the packet's entropy
 * value (UET carries it in the UDP source port, which switch hashes cover). The mixing is
 * Wellons' lowbias32 integer hash ("Prospecting for Hash Functions", 2018).
 */
uint32_t
EntropyHash(uint32_t flowHash, uint32_t entropy)
{
    uint32_t x = flowHash ^ (entropy * 0x9E3779B1u);
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}
} // namespace

TypeId
RdmaNic::GetTypeId()
{
    // one entry per attribute and trace source: a table, long because the NIC has many tunables
    static TypeId tid =
        TypeId("ns3::RdmaNic")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<RdmaNic>()
            .AddAttribute("AckInterval",
                          "Acknowledge every N in-order data packets (and the last one)",
                          UintegerValue(1),
                          MakeUintegerAccessor(&RdmaNic::m_ackInterval),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("CnpInterval",
                          "NP: at most one CNP per queue pair per interval (Mellanox "
                          "min_time_between_cnps; the DCQCN paper's N is 50 us). Must not "
                          "exceed Dcqcn::AlphaUpdateInterval by much, or alpha decays between "
                          "CNPs and cuts become negligible (see Dcqcn)",
                          TimeValue(MicroSeconds(4)),
                          MakeTimeAccessor(&RdmaNic::m_cnpInterval),
                          MakeTimeChecker())
            .AddAttribute("NackInterval",
                          "Receiver: minimum time between NACKs for the same expected byte",
                          TimeValue(MicroSeconds(500)),
                          MakeTimeAccessor(&RdmaNic::m_nackInterval),
                          MakeTimeChecker())
            .AddAttribute("Rto",
                          "Retransmission timeout: go back N after this long without ACK "
                          "progress, not counting time the queue pair's priority is paused at "
                          "its NIC. Default: the InfiniBand local ACK timeout NCCL sets, "
                          "4.096 us * 2^NCCL_IB_TIMEOUT with NCCL's default exponent 20 (4.29 s). "
                          "It must exceed the worst queueing delay of the lossless fabric (a full "
                          "32 MiB buffer drains in 2.7 ms at 100 Gb/s, 27 ms at 10 Gb/s), or a "
                          "network without drops retransmits",
                          TimeValue(NanoSeconds(4294967296LL)),
                          MakeTimeAccessor(&RdmaNic::m_rto),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("RtoLossy",
                          "Retransmission timeout used instead of Rto when the fabric is lossy "
                          "(PFC off): queueing is then bounded by the switch buffers, so IRN's "
                          "high RTO recovers tail losses quickly",
                          TimeValue(MicroSeconds(320)),
                          MakeTimeAccessor(&RdmaNic::m_rtoLossy),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("Transport",
                          "Loss recovery: roce (go-back-N), irn (selective acknowledgement "
                          "and retransmission, IRN: Mittal et al., SIGCOMM 2018) or uet (UET 1.0 "
                          "packet delivery: per-packet entropy, selective acknowledgement)",
                          EnumValue(ROCE),
                          MakeEnumAccessor<Transport>(&RdmaNic::m_transport),
                          MakeEnumChecker(ROCE, "roce", IRN, "irn", UET, "uet"))
            .AddAttribute("UetEntropies",
                          "uet: entropy values each queue pair cycles over, one per data packet "
                          "(UEC reference simulator htsim uec.cpp _path_entropy_size: 256; the "
                          "UET entropy field is 16 bits)",
                          UintegerValue(256),
                          MakeUintegerAccessor(&RdmaNic::m_entropies),
                          MakeUintegerChecker<uint32_t>(1, 65536))
            .AddAttribute("UetMinReorderPackets",
                          "uet: a hole is lost once data one congestion window beyond it, and at "
                          "least this many packets, is selectively acknowledged (htsim uec.cpp "
                          "fastLossRecovery: max(cwnd, 5 packets))",
                          UintegerValue(5),
                          MakeUintegerAccessor(&RdmaNic::m_uetMinReorder),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("UetTrimming",
                          "uet: the switches trim data packets they cannot buffer (RdmaSwitch "
                          "Trimming): the receiver NACKs a trimmed packet at once, the sender "
                          "resends it next, and reordering is never taken for loss (only trims "
                          "and the timeout are; NDP, SIGCOMM 2017)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&RdmaNic::m_uetTrimming),
                          MakeBooleanChecker())
            .AddAttribute("RcccShare",
                          "RCCC (Rccc): fraction of a receiving port's rate its credit grants "
                          "fill (1: the credited data arrives at the downlink's line rate)",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&RdmaNic::m_rcccShare),
                          MakeDoubleChecker<double>(0.01, 1.0))
            .AddAttribute("SackReorderThreshold",
                          "irn: a hole is retransmitted once data this many packets beyond its "
                          "start has been selectively acknowledged (1: IRN as published; 3: "
                          "TCP's duplicate-ACK threshold, RFC 5681, for sprayed packets)",
                          UintegerValue(1),
                          MakeUintegerAccessor(&RdmaNic::m_sackThreshold),
                          MakeUintegerChecker<uint32_t>(1))
            .AddTraceSource("Retransmit",
                            "A queue pair went back to its first unacknowledged byte "
                            "(flow id, sequence)",
                            MakeTraceSourceAccessor(&RdmaNic::m_retransmitTrace),
                            "ns3::RdmaNic::RetransmitTracedCallback")
            .AddTraceSource("Cnp",
                            "The NP sent a CNP (flow id)",
                            MakeTraceSourceAccessor(&RdmaNic::m_cnpTrace),
                            "ns3::RdmaNic::CnpTracedCallback")
            .AddTraceSource("Reorder",
                            "A data packet arrived ahead of the expected byte (flow id, its lead "
                            "in MTU packets)",
                            MakeTraceSourceAccessor(&RdmaNic::m_reorderTrace),
                            "ns3::RdmaNic::ReorderTracedCallback");
    return tid;
}

RdmaNic::RdmaNic()
{
    NS_LOG_FUNCTION(this);
}

RdmaNic::~RdmaNic()
{
    NS_LOG_FUNCTION(this);
}

void
RdmaNic::Setup(uint32_t nodeId,
               const std::vector<Ptr<QbbNetDevice>>& ports,
               RdmaFramePool* pool,
               const std::vector<std::unique_ptr<RdmaQueuePair>>* qps,
               const RdmaFrameSizes& sizes,
               uint32_t mtu)
{
    m_nodeId = nodeId;
    m_ports = ports;
    m_pool = pool;
    m_qps = qps;
    m_sizes = sizes;
    m_mtu = mtu;
    std::size_t n = ports.size();
    m_active.assign(n, {});
    m_rr.assign(n, 0);
    m_wake.assign(n, EventId());
    m_wakeAt.assign(n, std::numeric_limits<int64_t>::max());
    m_finishedOnPort.assign(n, 0);
    for (uint32_t p = 0; p < n; ++p)
    {
        ports[p]->SetHandler(this, p, pool);
    }
}

void
RdmaNic::SetLossless(bool lossless)
{
    m_lossless = lossless;
}

Time
RdmaNic::ActiveRto() const
{
    return m_lossless ? m_rto : m_rtoLossy;
}

void
RdmaNic::SetDeliveredCallback(Callback<void, uint32_t, uint32_t> cb)
{
    m_delivered = cb;
}

void
RdmaNic::SetIpReceiveCallback(Callback<void, const RdmaFrame*, uint32_t> cb)
{
    m_ipReceive = cb;
}

void
RdmaNic::StartQueuePair(uint32_t slot)
{
    RdmaQueuePair* qp = (*m_qps)[slot].get();
    int64_t now = Simulator::Now().GetNanoSeconds();
    qp->active = true;
    qp->startNs = now;
    qp->lastProgressNs = now;
    qp->nextAvailNs = now;
    qp->cc->SetRateChangeCallback(MakeCallback(&RdmaNic::RateChanged, this, slot));
    if (qp->cc->UsesCredit())
    {
        qp->credited = true;
        qp->creditLimit = qp->cc->GetInitialCredit();
        RequestCredit(qp);
    }
    m_active[qp->srcPort].push_back(qp);
    m_ports[qp->srcPort]->TryTransmit();
}

void
RdmaNic::Post(uint32_t slot, uint64_t end, uint64_t ffAt)
{
    RdmaQueuePair* qp = (*m_qps)[slot].get();
    end -= qp->ffBytes - ffAt;
    NS_ASSERT_MSG(end <= qp->size, "posting bytes beyond the queue pair's messages");
    qp->posted = std::max(qp->posted, end);
    if (qp->active)
    {
        if (qp->credited)
        {
            RequestCredit(qp);
        }
        m_ports[qp->srcPort]->TryTransmit();
    }
}

RdmaFrame*
RdmaNic::PullFrame(uint32_t port)
{
    std::vector<RdmaQueuePair*>& list = m_active[port];
    std::size_t n = list.size();
    if (n == 0)
    {
        return nullptr;
    }
    const QbbNetDevice* dev = PeekPointer(m_ports[port]);
    int64_t now = Simulator::Now().GetNanoSeconds();
    int64_t earliest = std::numeric_limits<int64_t>::max();
    std::size_t start = m_rr[port] % n;
    for (std::size_t i = 0; i < n; ++i)
    {
        std::size_t idx = start + i;
        if (idx >= n)
        {
            idx -= n;
        }
        RdmaQueuePair* qp = list[idx];
        if (!qp->active || (qp->sndNxt >= qp->posted && (m_transport == ROCE || !HasData(qp))) ||
            dev->IsPaused(qp->priority))
        {
            continue;
        }
        uint64_t window = qp->cc->GetWindow();
        if (window > 0 && !WindowOpen(qp, window))
        {
            continue;
        }
        if (qp->credited && qp->sndNxt >= qp->creditLimit && !HasData(qp))
        {
            continue; // RCCC: new data waits for credit (a resend needs none)
        }
        if (qp->nextAvailNs > now)
        {
            earliest = std::min(earliest, qp->nextAvailNs);
            continue;
        }
        m_rr[port] = static_cast<uint32_t>(idx + 1);
        return MakeData(qp);
    }
    if (earliest != std::numeric_limits<int64_t>::max() &&
        (!m_wake[port].IsPending() || m_wakeAt[port] > earliest))
    {
        m_wake[port].Cancel();
        m_wakeAt[port] = earliest;
        m_wake[port] = Simulator::Schedule(NanoSeconds(earliest - now), &RdmaNic::Wake, this, port);
    }
    return nullptr;
}

void
RdmaNic::Wake(uint32_t port)
{
    m_wakeAt[port] = std::numeric_limits<int64_t>::max();
    m_ports[port]->TryTransmit();
}

uint64_t
RdmaNic::MessageEnd(const RdmaQueuePair* qp, uint64_t seq, uint64_t fallback) const
{
    for (uint64_t e : qp->sendEnds)
    {
        if (e > seq)
        {
            return e;
        }
    }
    return fallback;
}

void
RdmaNic::PaceAfter(RdmaQueuePair* qp, uint32_t wireBytes, int64_t nowNs) const
{
    double rate = qp->cc->GetRate();
    if (rate >= qp->portRate)
    {
        qp->nextAvailNs = nowNs;
        qp->paceCarry = 0;
        return;
    }
    double gap = static_cast<double>(wireBytes) * 8e9 / rate + qp->paceCarry;
    double whole = std::floor(gap);
    qp->paceCarry = gap - whole;
    qp->nextAvailNs = nowNs + static_cast<int64_t>(whole);
}

RdmaFrame*
RdmaNic::MakeData(RdmaQueuePair* qp)
{
    int64_t now = Simulator::Now().GetNanoSeconds();
    uint64_t seq = qp->sndNxt;
    uint64_t end = qp->size;
    uint64_t holeEnd = 0;
    bool hole = m_transport != ROCE && qp->recovery && NextHole(qp, &seq, &holeEnd);
    end = MessageEnd(qp, seq, end);
    uint64_t limit = hole ? std::min(end, holeEnd) : end;
    uint32_t payload = static_cast<uint32_t>(std::min<uint64_t>(m_mtu, limit - seq));
    RdmaFrame* f = m_pool->Alloc();
    f->type = RdmaFrame::DATA;
    f->seq = seq;
    f->payload = payload;
    f->wireBytes = payload + m_sizes.dataHeader + m_sizes.intBytes;
    f->flow = qp->slot;
    f->dst = qp->dstNode;
    f->hash = qp->hash;
    if (m_transport == UET)
    {
        f->hash = EntropyHash(qp->hash, qp->entropy);
        qp->entropy = qp->entropy + 1 < m_entropies ? qp->entropy + 1 : 0;
    }
    f->priority = qp->priority;
    f->hop = 1; // hop 0 was this endpoint's own choice of port
    f->tsNs = now;
    f->last = seq + payload >= end ? 1 : 0;
    if (seq < qp->maxSent)
    {
        ++qp->retransmits;
    }
    if (qp->sndUna == qp->sndNxt)
    {
        qp->lastProgressNs = now; // the outstanding window opens now
    }
    if (hole)
    {
        // a trimmed packet is resent out of turn: the recovery's cursor stays where it was
        if (qp->trimLost.empty() || qp->trimLost.erase(seq) == 0)
        {
            qp->rtxNext = seq + payload;
        }
        if (m_transport == UET)
        {
            qp->rtxTimes[seq] = now;
            qp->cc->ReceiveLoss(payload);
        }
    }
    else
    {
        qp->sndNxt += payload;
        qp->maxSent = std::max(qp->maxSent, qp->sndNxt);
    }
    qp->lastTxNs = now;
    qp->lastTxBytes = f->wireBytes;
    PaceAfter(qp, f->wireBytes, now);
    if (!qp->rtoEvent.IsPending())
    {
        qp->rtoEvent =
            Simulator::Schedule(ActiveRto(), &RdmaNic::RetransmitTimeout, this, qp->slot);
    }
    qp->cc->OnSend(payload);
    return f;
}

void
RdmaNic::RateChanged(uint32_t slot, double oldRate, double newRate)
{
    RdmaQueuePair* qp = (*m_qps)[slot].get();
    if (!qp->active)
    {
        return;
    }
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (qp->nextAvailNs <= now && qp->lastTxNs != now)
    {
        return; // no gap pending: the next packet is paced at the new rate
    }
    // Re-time the pending gap at the new rate (S3 semantics).
    int64_t gap = newRate >= qp->portRate
                      ? 0
                      : static_cast<int64_t>(static_cast<double>(qp->lastTxBytes) * 8e9 / newRate);
    qp->paceCarry = 0;
    qp->nextAvailNs = std::max(now, qp->lastTxNs + gap);
    if (qp->nextAvailNs <= now)
    {
        m_ports[qp->srcPort]->TryTransmit();
    }
    else if (!m_wake[qp->srcPort].IsPending() || m_wakeAt[qp->srcPort] > qp->nextAvailNs)
    {
        m_wake[qp->srcPort].Cancel();
        m_wakeAt[qp->srcPort] = qp->nextAvailNs;
        m_wake[qp->srcPort] = Simulator::Schedule(
            NanoSeconds(qp->nextAvailNs - now), &RdmaNic::Wake, this, qp->srcPort);
    }
}

void
RdmaNic::HandleFrame(RdmaFrame* frame, uint32_t port)
{
    switch (frame->type)
    {
    case RdmaFrame::DATA:
        ReceiveData(frame);
        break;
    case RdmaFrame::ACK:
    case RdmaFrame::NACK:
        ReceiveAck(frame);
        break;
    case RdmaFrame::CNP: {
        RdmaQueuePair* qp = (*m_qps)[frame->flow].get();
        ++qp->cnps;
        if (!qp->IsFinished())
        {
            qp->cc->ReceiveCnp();
        }
        break;
    }
    case RdmaFrame::REQUEST:
        ReceiveRequest(frame);
        break;
    case RdmaFrame::CREDIT:
        ReceiveCredit(frame);
        break;
    case RdmaFrame::IP:
        NS_ASSERT_MSG(!m_ipReceive.IsNull(),
                      "IP frame at an endpoint without the socket transport");
        m_ipReceive(frame, m_nodeId);
        break;
    default:
        NS_ASSERT_MSG(false, "unexpected frame type at an endpoint");
        break;
    }
    m_pool->Free(frame);
}

void
RdmaNic::ReceiveData(RdmaFrame* f)
{
    RdmaQueuePair* qp = (*m_qps)[f->flow].get();
    NS_ASSERT_MSG(qp->dstNode == m_nodeId, "data delivered to the wrong endpoint");
    if (f->trimmed)
    {
        ReceiveTrimmed(qp, f);
        return;
    }
    if (qp->creditTracked)
    {
        m_pacers[qp->dstPort]->Arrived(f->payload);
    }
    qp->creditRcvd += f->payload;
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (f->ce && qp->cc->UsesCnp() &&
        (qp->lastCnpNs < 0 || now - qp->lastCnpNs >= m_cnpInterval.GetNanoSeconds()))
    {
        qp->lastCnpNs = now;
        ++m_cnpsSent;
        m_cnpTrace(qp->flowId);
        SendControl(qp, RdmaFrame::CNP, 0, true, nullptr);
    }
    if (f->seq == qp->rcvNxt)
    {
        ReceiveInOrder(qp, f);
    }
    else if (f->seq > qp->rcvNxt)
    {
        CountReorder(qp, f);
        if (m_transport != ROCE)
        {
            ReceiveOutOfOrder(qp, f);
        }
        else if (qp->lastNackNs < 0 || qp->lastNackSeq != qp->rcvNxt ||
                 now - qp->lastNackNs >= m_nackInterval.GetNanoSeconds())
        {
            qp->lastNackNs = now;
            qp->lastNackSeq = qp->rcvNxt;
            SendControl(qp, RdmaFrame::NACK, qp->rcvNxt, false, f);
        }
    }
    else if (f->last)
    {
        // A retransmitted tail of a delivered message: re-acknowledge so the sender can stop.
        SendControl(qp, RdmaFrame::ACK, qp->rcvNxt, false, f);
    }
}

void
RdmaNic::ReceiveInOrder(RdmaQueuePair* qp, const RdmaFrame* f)
{
    qp->rcvNxt += f->payload;
    ++qp->pktsSinceAck;
    qp->ceSinceAck = qp->ceSinceAck || f->ce;
    bool filled = !qp->oooRecv.empty();
    if (filled)
    {
        AbsorbOutOfOrder(qp);
    }
    bool done = !qp->recvEnds.empty() && qp->rcvNxt >= qp->recvEnds.front().first;
    if (qp->pktsSinceAck >= m_ackInterval || done || filled)
    {
        SendControl(qp, RdmaFrame::ACK, qp->rcvNxt, qp->ceSinceAck, f);
        qp->pktsSinceAck = 0;
        qp->ceSinceAck = false;
    }
    while (!qp->recvEnds.empty() && qp->rcvNxt >= qp->recvEnds.front().first)
    {
        uint32_t flowId = qp->recvEnds.front().second;
        qp->recvEnds.pop_front();
        if (!m_delivered.IsNull())
        {
            m_delivered(qp->slot, flowId);
        }
    }
    qp->delivered = qp->recvEnds.empty();
}

void
RdmaNic::ReceiveTrimmed(RdmaQueuePair* qp, const RdmaFrame* f)
{
    if (m_transport != UET || !m_uetTrimming)
    {
        return; // a transport that does not read trimmed headers: the packet is lost
    }
    uint64_t end = f->seq + f->payload;
    bool have = end <= qp->rcvNxt;
    auto it = qp->oooRecv.upper_bound(f->seq);
    if (!have && it != qp->oooRecv.begin())
    {
        --it;
        have = it->first <= f->seq && it->second >= end;
    }
    if (have)
    {
        return; // a resent copy of data already here was trimmed: nothing to ask for
    }
    SendControl(qp, RdmaFrame::NACK, qp->rcvNxt, false, f);
}

void
RdmaNic::CountReorder(RdmaQueuePair* qp, const RdmaFrame* f)
{
    uint64_t lead = (f->seq - qp->rcvNxt + m_mtu - 1) / m_mtu;
    auto depth = static_cast<uint32_t>(std::min<uint64_t>(lead, 0xFFFFFFFFULL));
    ++qp->oooPackets;
    qp->maxReorderDepth = std::max(qp->maxReorderDepth, depth);
    m_reorderTrace(qp->flowId, depth);
}

void
RdmaNic::ReceiveOutOfOrder(RdmaQueuePair* qp, const RdmaFrame* f)
{
    uint64_t start = f->seq;
    uint64_t end = f->seq + f->payload;
    // merge [start, end) into the received ranges (kept disjoint and non-adjacent)
    auto it = qp->oooRecv.upper_bound(start);
    if (it != qp->oooRecv.begin() && std::prev(it)->second >= start)
    {
        --it;
        start = it->first;
        end = std::max(end, it->second);
        it = qp->oooRecv.erase(it);
    }
    while (it != qp->oooRecv.end() && it->first <= end)
    {
        end = std::max(end, it->second);
        it = qp->oooRecv.erase(it);
    }
    qp->oooRecv.emplace(start, end);
    qp->ceSinceAck = qp->ceSinceAck || f->ce;
    SendControl(qp, RdmaFrame::NACK, qp->rcvNxt, qp->ceSinceAck, f);
    qp->ceSinceAck = false;
    qp->pktsSinceAck = 0;
}

void
RdmaNic::AbsorbOutOfOrder(RdmaQueuePair* qp)
{
    while (!qp->oooRecv.empty() && qp->oooRecv.begin()->first <= qp->rcvNxt)
    {
        qp->rcvNxt = std::max(qp->rcvNxt, qp->oooRecv.begin()->second);
        qp->oooRecv.erase(qp->oooRecv.begin());
    }
}

void
RdmaNic::SendControl(RdmaQueuePair* qp, uint8_t type, uint64_t seq, bool ce, const RdmaFrame* data)
{
    RdmaFrame* f = m_pool->Alloc();
    f->type = type;
    f->seq = seq;
    f->ce = ce ? 1 : 0;
    f->flow = qp->slot;
    f->dst = qp->srcNode;
    f->hash = qp->ackHash;
    f->priority = qp->priority;
    f->hop = 1;
    if (type == RdmaFrame::CNP)
    {
        f->wireBytes = m_sizes.cnp;
    }
    else
    {
        f->wireBytes = m_sizes.ack + m_sizes.intBytes;
        if (type == RdmaFrame::ACK)
        {
            ++m_acksSent;
        }
        else if (type == RdmaFrame::NACK)
        {
            ++m_nacksSent;
        }
    }
    if (data != nullptr)
    {
        f->tsNs = data->tsNs;
        if (type == RdmaFrame::NACK && m_transport != ROCE)
        {
            f->sack = data->seq;
            f->payload = data->payload;
            f->trimmed = data->trimmed;
        }
        if (type == RdmaFrame::ACK && data->nHops > 0)
        {
            f->nHops = data->nHops;
            std::copy(data->hops, data->hops + data->nHops, f->hops);
        }
    }
    m_ports[qp->dstPort]->Enqueue(f, QbbNetDevice::CONTROL_QUEUE);
}

void
RdmaNic::ReceiveAck(RdmaFrame* f)
{
    RdmaQueuePair* qp = (*m_qps)[f->flow].get();
    if (!qp->active || qp->IsFinished())
    {
        return;
    }
    int64_t now = Simulator::Now().GetNanoSeconds();
    uint64_t newly = 0;
    if (m_transport == UET && !f->trimmed)
    {
        LearnReordering(qp, f);
    }
    if (f->seq > qp->sndUna)
    {
        newly = f->seq - qp->sndUna;
        qp->sndUna = f->seq;
        qp->lastProgressNs = now;
        qp->sndNxt = std::max(qp->sndNxt, qp->sndUna);
        while (!qp->sendEnds.empty() && qp->sendEnds.front() <= qp->sndUna)
        {
            qp->sendEnds.pop_front();
        }
        if (m_transport != ROCE)
        {
            AdvanceSelective(qp);
        }
    }
    if (f->type == RdmaFrame::NACK)
    {
        ++qp->nacks;
        if (f->trimmed)
        {
            ++qp->trimNacks;
            AddTrimmed(qp, f->sack, f->payload);
            if (!qp->trimLost.empty())
            {
                Recover(qp, false);
                qp->recoverEnd = std::max(qp->recoverEnd, qp->trimLost.rbegin()->second);
            }
        }
        else if (m_transport != ROCE)
        {
            AddSack(qp, f->sack, f->payload);
            Recover(qp, false);
        }
        else
        {
            GoBack(qp);
        }
        if (m_transport == UET && !f->trimmed && !qp->IsFinished())
        {
            // a selective acknowledgement: the congestion control hears it as any ACK
            RdmaAckInfo info{
                f->seq, qp->sndNxt, UetNewlyAcked(qp), f->ce != 0, now - f->tsNs, nullptr, 0};
            qp->cc->ReceiveAck(info);
        }
    }
    else
    {
        RdmaAckInfo info{f->seq,
                         qp->sndNxt,
                         newly,
                         f->ce != 0,
                         now - f->tsNs,
                         f->nHops > 0 ? f->hops : nullptr,
                         f->nHops};
        if (m_transport == UET)
        {
            info.newlyAcked = UetNewlyAcked(qp);
        }
        qp->cc->ReceiveAck(info);
    }
    if (qp->IsFinished())
    {
        qp->senderDoneNs = now;
        qp->active = false;
        qp->cc->Stop();
        qp->rtoEvent.Cancel();
        if (++m_finishedOnPort[qp->srcPort] * 2 > m_active[qp->srcPort].size())
        {
            Compact(qp->srcPort);
        }
        return;
    }
    m_ports[qp->srcPort]->TryTransmit();
}

void
RdmaNic::GoBack(RdmaQueuePair* qp)
{
    if (qp->sndNxt > qp->sndUna)
    {
        m_retransmitTrace(qp->flowId, qp->sndUna);
        qp->sndNxt = qp->sndUna;
    }
}

void
RdmaNic::AdvanceSelective(RdmaQueuePair* qp)
{
    // forget selective acknowledgements below the cumulative one
    while (!qp->sacked.empty() && qp->sacked.begin()->first < qp->sndUna)
    {
        auto first = qp->sacked.begin();
        uint64_t start = first->first;
        uint64_t end = first->second;
        qp->sacked.erase(first);
        if (end > qp->sndUna)
        {
            qp->sackedBytes -= qp->sndUna - start;
            qp->sacked.emplace(qp->sndUna, end);
            break;
        }
        qp->sackedBytes -= end - start;
    }
    qp->rtxNext = std::max(qp->rtxNext, qp->sndUna);
    while (!qp->trimLost.empty() && qp->trimLost.begin()->second <= qp->sndUna)
    {
        qp->trimLost.erase(qp->trimLost.begin());
    }
    if (qp->recovery && qp->sndUna >= qp->recoverEnd)
    {
        qp->recovery = false;
        qp->rtoRecovery = false;
    }
}

void
RdmaNic::AddSack(RdmaQueuePair* qp, uint64_t seq, uint64_t bytes)
{
    uint64_t start = std::max(seq, qp->sndUna);
    uint64_t end = seq + bytes;
    if (end <= start)
    {
        return;
    }
    qp->sackHigh = std::max(qp->sackHigh, end);
    uint64_t merged = 0; // bytes of the ranges the new one absorbs
    auto it = qp->sacked.upper_bound(start);
    if (it != qp->sacked.begin() && std::prev(it)->second >= start)
    {
        --it;
        start = it->first;
        end = std::max(end, it->second);
        merged += it->second - it->first;
        it = qp->sacked.erase(it);
    }
    while (it != qp->sacked.end() && it->first <= end)
    {
        end = std::max(end, it->second);
        merged += it->second - it->first;
        it = qp->sacked.erase(it);
    }
    qp->sacked.emplace(start, end);
    qp->sackedBytes += end - start - merged;
}

void
RdmaNic::AddTrimmed(RdmaQueuePair* qp, uint64_t seq, uint64_t bytes)
{
    uint64_t end = seq + bytes;
    if (end <= qp->sndUna)
    {
        return; // acknowledged since (another copy arrived)
    }
    auto it = qp->sacked.upper_bound(seq);
    if (it != qp->sacked.begin() && std::prev(it)->first <= seq && std::prev(it)->second >= end)
    {
        return; // selectively acknowledged already
    }
    qp->trimLost[seq] = end;
}

void
RdmaNic::RequestCredit(RdmaQueuePair* qp)
{
    if (qp->posted <= qp->creditLimit || qp->posted <= qp->creditAsked)
    {
        return; // the credit held, or already asked for, covers what is posted
    }
    qp->creditAsked = qp->posted;
    RdmaFrame* f = m_pool->Alloc();
    f->type = RdmaFrame::REQUEST;
    f->seq = qp->posted;
    f->flow = qp->slot;
    f->dst = qp->dstNode;
    f->hash = qp->hash;
    f->priority = qp->priority;
    f->hop = 1;
    f->wireBytes = m_sizes.ack;
    m_ports[qp->srcPort]->Enqueue(f, QbbNetDevice::CONTROL_QUEUE);
}

void
RdmaNic::ReceiveRequest(const RdmaFrame* f)
{
    RdmaQueuePair* qp = (*m_qps)[f->flow].get();
    NS_ASSERT_MSG(qp->dstNode == m_nodeId, "credit request delivered to the wrong endpoint");
    // the initial credit is a protocol constant both ends know
    uint64_t initial = qp->cc->GetInitialCredit();
    if (f->seq <= qp->creditWant && qp->creditEnd > initial && !qp->creditOwed)
    {
        SendCredit(qp); // a repeated request: its credit (or request) was lost, re-send it
    }
    qp->creditWant = std::max(qp->creditWant, f->seq);
    qp->creditEnd = std::max(qp->creditEnd, initial);
    if (m_pacers.size() < m_ports.size())
    {
        m_pacers.resize(m_ports.size());
    }
    Ptr<RcccPacer>& pacer = m_pacers[qp->dstPort];
    if (!pacer)
    {
        pacer = CreateObject<RcccPacer>();
        pacer->Setup(static_cast<double>(m_ports[qp->dstPort]->GetRateBps()) * m_rcccShare,
                     m_mtu,
                     m_sizes.dataHeader + m_sizes.intBytes,
                     MakeCallback(&RdmaNic::SendCredit, this));
    }
    double rate = static_cast<double>(m_ports[qp->dstPort]->GetRateBps());
    auto bdp = static_cast<uint64_t>(rate / 8.0 * qp->cc->GetBaseRtt().GetSeconds());
    pacer->Request(qp, qp->cc->GetInitialCredit(), bdp);
}

void
RdmaNic::SendCredit(RdmaQueuePair* qp)
{
    SendControl(qp, RdmaFrame::CREDIT, qp->creditEnd, false, nullptr);
}

void
RdmaNic::ReceiveCredit(const RdmaFrame* f)
{
    RdmaQueuePair* qp = (*m_qps)[f->flow].get();
    if (f->seq <= qp->creditLimit)
    {
        return;
    }
    qp->creditLimit = f->seq;
    if (qp->active && !qp->IsFinished())
    {
        m_ports[qp->srcPort]->TryTransmit();
    }
}

void
RdmaNic::Recover(RdmaQueuePair* qp, bool timeout)
{
    if (!qp->recovery || timeout)
    {
        m_retransmitTrace(qp->flowId, qp->sndUna);
        qp->recovery = true;
        qp->recoverEnd = qp->sndNxt;
        qp->rtxNext = qp->sndUna;
    }
    else
    {
        // holes above the old end, reported since, are recovered in the same episode
        qp->recoverEnd = std::max(qp->recoverEnd, qp->sackHigh);
    }
    qp->rtoRecovery = qp->rtoRecovery || timeout;
}

bool
RdmaNic::NextHole(const RdmaQueuePair* qp, uint64_t* start, uint64_t* end) const
{
    if (m_uetTrimming && m_transport == UET)
    {
        // trims are the loss signal: resend the trimmed packets first, then (after a
        // timeout only) every hole
        for (const auto& [trimStart, trimEnd] : qp->trimLost)
        {
            if (trimEnd > qp->sndUna)
            {
                *start = std::max(trimStart, qp->sndUna);
                *end = trimEnd;
                return true;
            }
        }
        if (!qp->rtoRecovery)
        {
            return false;
        }
    }
    uint64_t lost = qp->recoverEnd;
    if (!qp->rtoRecovery)
    {
        uint64_t margin = static_cast<uint64_t>(m_sackThreshold - 1) * m_mtu;
        if (m_transport == UET)
        {
            // a windowless RCCC sender has about its initial credit (one BDP) in flight
            margin = std::max({margin,
                               qp->cc->GetWindow(),
                               qp->credited ? qp->cc->GetInitialCredit() : 0,
                               qp->reorderSeen,
                               static_cast<uint64_t>(m_uetMinReorder) * m_mtu});
        }
        lost = std::min(lost, qp->sackHigh > margin ? qp->sackHigh - margin : 0);
    }
    uint64_t pos = std::max(qp->rtxNext, qp->sndUna);
    auto it = qp->sacked.upper_bound(pos);
    if (it != qp->sacked.begin() && std::prev(it)->second > pos)
    {
        pos = std::prev(it)->second;
    }
    if (pos >= lost)
    {
        return false;
    }
    *start = pos;
    *end = it == qp->sacked.end() ? qp->recoverEnd : std::min(it->first, qp->recoverEnd);
    return true;
}

bool
RdmaNic::HasData(const RdmaQueuePair* qp) const
{
    uint64_t start = 0;
    uint64_t end = 0;
    return m_transport != ROCE && qp->recovery && NextHole(qp, &start, &end);
}

bool
RdmaNic::WindowOpen(const RdmaQueuePair* qp, uint64_t window) const
{
    if (m_transport != UET)
    {
        return qp->InFlight() < window;
    }
    // selectively acknowledged bytes have left the network; a lost hole is resent regardless
    return qp->InFlight() - qp->sackedBytes < window || HasData(qp);
}

void
RdmaNic::LearnReordering(RdmaQueuePair* qp, const RdmaFrame* f)
{
    // the packet this acknowledgement reports: the one that filled the first hole (an ACK
    // advancing sndUna) or a selectively acknowledged one; if data sent after it was already
    // selectively acknowledged, it arrived late by that many bytes. A resent packet's copy
    // tells nothing (its lateness is the loss's), but the original of a packet resent in vain
    // (echoed send time before the resend) tells how late the paths deliver.
    uint64_t late = f->type == RdmaFrame::NACK ? f->sack : qp->sndUna;
    bool reported = f->type == RdmaFrame::NACK || f->seq > qp->sndUna;
    if (reported && qp->sackHigh > late)
    {
        auto rtx = qp->rtxTimes.find(late);
        if (rtx == qp->rtxTimes.end() || f->tsNs < rtx->second)
        {
            qp->reorderSeen = std::max(qp->reorderSeen, qp->sackHigh - late);
        }
    }
    // forget resends below the cumulative acknowledgement this frame brings
    while (!qp->rtxTimes.empty() && qp->rtxTimes.begin()->first < f->seq)
    {
        qp->rtxTimes.erase(qp->rtxTimes.begin());
    }
}

uint64_t
RdmaNic::UetNewlyAcked(RdmaQueuePair* qp)
{
    uint64_t acked = qp->sndUna + qp->sackedBytes;
    uint64_t newly = acked > qp->ccAcked ? acked - qp->ccAcked : 0;
    qp->ccAcked = std::max(qp->ccAcked, acked);
    return newly;
}

void
RdmaNic::RetransmitTimeout(uint32_t slot)
{
    RdmaQueuePair* qp = (*m_qps)[slot].get();
    if (qp->active && !qp->IsFinished() && qp->sndNxt == qp->sndUna && qp->credited &&
        qp->posted > qp->creditLimit)
    {
        // RCCC: all credit used and acknowledged, still no grant: the REQUEST or the last
        // CREDIT was lost; ask again (the receiver re-sends the credit it granted)
        qp->creditAsked = 0;
        RequestCredit(qp);
        qp->rtoEvent = Simulator::Schedule(ActiveRto(), &RdmaNic::RetransmitTimeout, this, slot);
        return;
    }
    if (!qp->active || qp->IsFinished() || qp->sndNxt == qp->sndUna)
    {
        return; // re-armed by the next send
    }
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (m_ports[qp->srcPort]->IsPaused(qp->priority))
    {
        // PFC holds the queue pair back: no loss can be inferred; restart the timer.
        qp->lastProgressNs = now;
        qp->rtoEvent = Simulator::Schedule(ActiveRto(), &RdmaNic::RetransmitTimeout, this, slot);
        return;
    }
    int64_t due = qp->lastProgressNs + ActiveRto().GetNanoSeconds();
    if (now >= due)
    {
        ++qp->timeouts;
        if (m_transport != ROCE)
        {
            Recover(qp, true);
        }
        else
        {
            GoBack(qp);
        }
        qp->lastProgressNs = now;
        qp->rtoEvent = Simulator::Schedule(ActiveRto(), &RdmaNic::RetransmitTimeout, this, slot);
        m_ports[qp->srcPort]->TryTransmit();
    }
    else
    {
        qp->rtoEvent =
            Simulator::Schedule(NanoSeconds(due - now), &RdmaNic::RetransmitTimeout, this, slot);
    }
}

void
RdmaNic::Compact(uint32_t port)
{
    std::vector<RdmaQueuePair*>& list = m_active[port];
    list.erase(
        std::remove_if(list.begin(), list.end(), [](RdmaQueuePair* qp) { return !qp->active; }),
        list.end());
    m_finishedOnPort[port] = 0;
    m_rr[port] = list.empty() ? 0 : m_rr[port] % list.size();
}

void
RdmaNic::ShiftClock(int64_t deltaNs,
                    std::vector<const EventImpl*>* moved,
                    uint64_t acks,
                    uint64_t cnps)
{
    for (std::size_t p = 0; p < m_wake.size(); ++p)
    {
        if (m_wake[p].IsPending())
        {
            ShiftEventId(m_wake[p], deltaNs, moved);
            m_wakeAt[p] += deltaNs;
        }
    }
    m_acksSent += acks;
    m_cnpsSent += cnps;
}

uint64_t
RdmaNic::GetCnpsSent() const
{
    return m_cnpsSent;
}

uint64_t
RdmaNic::GetAcksSent() const
{
    return m_acksSent;
}

uint64_t
RdmaNic::GetNacksSent() const
{
    return m_nacksSent;
}

RdmaNic::Transport
RdmaNic::GetTransport() const
{
    return m_transport;
}

void
RdmaNic::DoDispose()
{
    for (auto& ev : m_wake)
    {
        ev.Cancel();
    }
    for (auto& pacer : m_pacers)
    {
        if (pacer)
        {
            pacer->Dispose();
        }
    }
    m_pacers.clear();
    for (auto& dev : m_ports)
    {
        dev->SetHandler(nullptr, 0, nullptr);
    }
    m_ports.clear();
    m_active.clear();
    m_delivered = MakeNullCallback<void, uint32_t, uint32_t>();
    Object::DoDispose();
}

} // namespace ns3
