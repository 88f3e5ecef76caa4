/*
 * HeteroSim: NCCL's socket transport (net_socket.cc) over ns-3's TCP on the packet fabric.
 */
#include "socket-transport.h"

#include "ns3/boolean.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-header.h"
#include "ns3/ipv4-interface-address.h"
#include "ns3/ipv4-static-routing-helper.h"
#include "ns3/ipv4.h"
#include "ns3/log.h"
#include "ns3/net-device-queue-interface.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("SocketTransport");
NS_OBJECT_ENSURE_REGISTERED(SocketTransport);

namespace
{
constexpr uint32_t ADDRESS_BASE = 0x0A000000; //!< 10.0.0.0/8
constexpr uint16_t LISTEN_PORT = 5000;        //!< NCCL listens on an ephemeral port; any fixed one
constexpr uint32_t SIZE_HEADER = 4;           //!< bytes of a request's size on the control socket
constexpr uint32_t ETHERNET_BYTES = 18;       //!< Ethernet header 14 + FCS 4
constexpr uint32_t MIN_FRAME = 64;            //!< minimum Ethernet frame
} // namespace

TypeId
SocketTransport::GetTypeId()
{
    // one entry per attribute and trace source: a table, long because the socket transport has many
    static TypeId tid =
        TypeId("ns3::SocketTransport")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<SocketTransport>()
            .AddAttribute("SocketNthreads",
                          "NCCL_SOCKET_NTHREADS: helper threads per connection (0: the control "
                          "socket carries the data; NCCL's default off AWS/GCP), at most 16",
                          UintegerValue(0),
                          MakeUintegerAccessor(&SocketTransport::m_nThreads),
                          MakeUintegerChecker<uint32_t>(0, 16))
            .AddAttribute("NsocksPerThread",
                          "NCCL_NSOCKS_PERTHREAD: data sockets per helper thread; threads x "
                          "sockets is at most 64",
                          UintegerValue(1),
                          MakeUintegerAccessor(&SocketTransport::m_nSocksPerThread),
                          MakeUintegerChecker<uint32_t>(1, 64))
            .AddAttribute("MinChunkSize",
                          "Smallest task a request is split into over the data sockets, bytes "
                          "(MIN_CHUNKSIZE in net_socket.cc)",
                          UintegerValue(64 * 1024),
                          MakeUintegerAccessor(&SocketTransport::m_minChunk),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("RequestBytes",
                          "Largest isend NCCL's proxy posts, bytes (NCCL_BUFFSIZE / NCCL_STEPS "
                          "= 4 MiB / 8 for the Simple protocol)",
                          UintegerValue(512 * 1024),
                          MakeUintegerAccessor(&SocketTransport::m_requestBytes),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("TcpCongestionControl",
                          "TypeId name of the TCP congestion control (ns3::TcpCubic, "
                          "ns3::TcpDctcp, ns3::TcpNewReno, ns3::TcpBbr, ...)",
                          StringValue("ns3::TcpCubic"),
                          MakeStringAccessor(&SocketTransport::m_tcpType),
                          MakeStringChecker())
            .AddAttribute("TcpSndBufSize",
                          "TCP send buffer per socket, bytes (Linux tcp_wmem maximum)",
                          UintegerValue(4194304),
                          MakeUintegerAccessor(&SocketTransport::m_sndBuf),
                          MakeUintegerChecker<uint32_t>(1024))
            .AddAttribute("TcpRcvBufSize",
                          "TCP receive buffer per socket, bytes (Linux tcp_rmem maximum)",
                          UintegerValue(6291456),
                          MakeUintegerAccessor(&SocketTransport::m_rcvBuf),
                          MakeUintegerChecker<uint32_t>(1024))
            .AddAttribute("IpMtu",
                          "IP MTU of socket hosts, bytes; the TCP segment is MTU - 52 (IPv4 "
                          "20, TCP 20, timestamp option 12)",
                          UintegerValue(1500),
                          MakeUintegerAccessor(&SocketTransport::m_mtu),
                          MakeUintegerChecker<uint16_t>(576, 9000))
            .AddAttribute("TcpMinRto",
                          "TCP minimum retransmission timeout (Linux TCP_RTO_MIN = 200 ms)",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&SocketTransport::m_minRto),
                          MakeTimeChecker())
            .AddAttribute("TcpDelAckTimeout",
                          "Receiver's delayed-ACK timeout (Linux TCP_DELACK_MIN = TCP_ATO_MIN = "
                          "HZ / 25 = 40 ms, include/net/tcp.h); shorter than TcpMinRto, or a lone "
                          "unacknowledged segment waits for the sender's RTO",
                          TimeValue(MilliSeconds(40)),
                          MakeTimeAccessor(&SocketTransport::m_delAckTimeout),
                          MakeTimeChecker())
            .AddAttribute("TcpInitialCwnd",
                          "TCP initial congestion window, segments (RFC 6928, Linux default)",
                          UintegerValue(10),
                          MakeUintegerAccessor(&SocketTransport::m_initialCwnd),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("TcpPriority",
                          "Traffic class of TCP frames in the fabric (0: best effort)",
                          UintegerValue(0),
                          MakeUintegerAccessor(&SocketTransport::m_priority),
                          MakeUintegerChecker<uint8_t>(0, 7))
            .AddAttribute("TcpLossless",
                          "Keep PFC on the TCP class (else it is lossy on lossless switches)",
                          BooleanValue(false),
                          MakeBooleanAccessor(&SocketTransport::m_lossless),
                          MakeBooleanChecker())
            .AddAttribute("TcpTxQueueBytes",
                          "Bytes of TCP frames the NIC's transmit ring holds: with a HostQueueDisc "
                          "the queue disc is stopped while the ring holds this much (flow "
                          "control, as Linux's byte queue limits do); without one, frames beyond "
                          "it are dropped",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&SocketTransport::m_txQueueBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("HostQueueDisc",
                          "Queue disc of socket hosts' interfaces, an ns-3 TypeId name "
                          "(ns3::FqCoDelQueueDisc: systemd's net.core.default_qdisc) or none",
                          StringValue("ns3::FqCoDelQueueDisc"),
                          MakeStringAccessor(&SocketTransport::m_qdisc),
                          MakeStringChecker())
            .AddAttribute("CwndSampleInterval",
                          "Keep a congestion-window series (0 = none): every decrease, and an "
                          "increase when this long has passed since the connection's last sample",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&SocketTransport::m_cwndInterval),
                          MakeTimeChecker())
            .AddTraceSource(
                "Cwnd",
                "Congestion window of a TCP connection changed (stream, old, new bytes)",
                MakeTraceSourceAccessor(&SocketTransport::m_cwndTrace),
                "ns3::SocketTransport::CwndTracedCallback")
            .AddTraceSource("Retransmission",
                            "A TCP connection retransmitted a segment (stream)",
                            MakeTraceSourceAccessor(&SocketTransport::m_retxTrace),
                            "ns3::SocketTransport::StreamTracedCallback")
            .AddTraceSource("Timeout",
                            "A TCP connection's retransmission timer expired (stream)",
                            MakeTraceSourceAccessor(&SocketTransport::m_timeoutTrace),
                            "ns3::SocketTransport::StreamTracedCallback");
    return tid;
}

SocketTransport::SocketTransport()
{
    NS_LOG_FUNCTION(this);
}

SocketTransport::~SocketTransport()
{
    NS_LOG_FUNCTION(this);
}

Ipv4Address
SocketTransport::AddressOf(uint32_t node)
{
    return Ipv4Address(ADDRESS_BASE + node + 1);
}

void
SocketTransport::Setup(Ptr<TopologyDescription> desc,
                       const std::vector<Ptr<Node>>& nodes,
                       const std::vector<std::vector<uint32_t>>& nodePorts,
                       const std::vector<Ptr<QbbNetDevice>>& portDev,
                       RdmaFramePool* pool,
                       uint32_t seed,
                       bool ecmp,
                       uint32_t phyBytes,
                       MessageDoneCallback done)
{
    NS_LOG_FUNCTION(this);
    m_desc = desc;
    m_nodes = nodes;
    m_nodePorts = nodePorts;
    m_portDev = portDev;
    m_pool = pool;
    m_seed = seed;
    m_ecmp = ecmp;
    m_phy = phyBytes;
    m_done = done;
    m_dev.assign(nodes.size(), nullptr);
    m_txQueue.assign(nodes.size(), nullptr);
    m_listener.assign(nodes.size(), nullptr);
    for (uint32_t gp = 0; gp < m_portDev.size(); ++gp)
    {
        m_portDev[gp]->TraceConnectWithoutContext(
            "Drop", MakeBoundCallback(&SocketTransport::FrameDropped, this, gp));
    }
}

uint8_t
SocketTransport::GetPriority() const
{
    return m_priority;
}

bool
SocketTransport::IsLossless() const
{
    return m_lossless;
}

uint32_t
SocketTransport::GetDataSockets() const
{
    return std::min<uint32_t>(m_nThreads * m_nSocksPerThread,
                              m_nThreads == 0 ? 0 : 64 / m_nThreads * m_nThreads);
}

void
SocketTransport::EnsureStack(uint32_t node)
{
    if (m_dev[node])
    {
        return;
    }
    NS_ASSERT_MSG(m_desc->GetNodeKind(node) == TopologyDescription::NIC,
                  "node " << node << " is not a NIC");
    Ptr<Node> n = m_nodes[node];
    InternetStackHelper stack;
    stack.SetIpv6StackInstall(false);
    Ipv4StaticRoutingHelper routing;
    stack.SetRoutingHelper(routing);
    stack.Install(n);
    Ptr<TcpL4Protocol> tcp = n->GetObject<TcpL4Protocol>();
    TypeId cc;
    NS_ASSERT_MSG(TypeId::LookupByNameFailSafe(m_tcpType, &cc),
                  "unknown TCP congestion control " << m_tcpType);
    tcp->SetAttribute("SocketType", TypeIdValue(cc));

    Ptr<FabricIpDevice> dev = CreateObject<FabricIpDevice>();
    dev->SetAttribute("Mtu", UintegerValue(m_mtu));
    dev->SetTopologyNode(node);
    n->AddDevice(dev);
    dev->SetTransmitCallback(MakeCallback(&SocketTransport::Transmit, this));
    Ptr<NetDeviceQueueInterface> queues;
    if (m_qdisc != "none")
    {
        queues = CreateObject<NetDeviceQueueInterface>();
        dev->AggregateObject(queues);
    }
    Ptr<Ipv4> ipv4 = n->GetObject<Ipv4>();
    int32_t iface = ipv4->AddInterface(dev);
    ipv4->AddAddress(iface, Ipv4InterfaceAddress(AddressOf(node), Ipv4Mask("255.0.0.0")));
    ipv4->SetUp(iface);
    if (queues)
    {
        TrafficControlHelper tc;
        tc.SetRootQueueDisc(m_qdisc);
        tc.Install(dev);
        m_txQueue[node] = queues->GetTxQueue(0);
        for (uint32_t gp : m_nodePorts[node])
        {
            m_portDev[gp]->TraceConnectWithoutContext(
                "Dequeue", MakeBoundCallback(&SocketTransport::PortDequeued, this, node, gp));
        }
    }
    // The stack arrives while the simulation runs, after the node's own initialisation:
    // initialise what was aggregated since (traffic control scans its devices and queue discs).
    n->Initialize();
    m_dev[node] = dev;

    Ptr<Socket> listener = Socket::CreateSocket(n, TcpSocketFactory::GetTypeId());
    listener->SetAttribute("SndBufSize", UintegerValue(m_sndBuf));
    listener->SetAttribute("RcvBufSize", UintegerValue(m_rcvBuf));
    listener->SetAttribute("SegmentSize", UintegerValue(m_mtu - 52));
    listener->SetAttribute("InitialCwnd", UintegerValue(m_initialCwnd));
    listener->SetAttribute("MinRto", TimeValue(m_minRto));
    listener->SetAttribute("DelAckTimeout", TimeValue(m_delAckTimeout));
    listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), LISTEN_PORT));
    listener->Listen();
    listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                MakeCallback(&SocketTransport::Accepted, this));
    m_listener[node] = listener;
}

void
SocketTransport::Send(uint32_t flowId,
                      uint32_t srcGpu,
                      uint32_t dstGpu,
                      uint32_t srcNode,
                      uint32_t dstNode,
                      uint64_t bytes,
                      int64_t connection,
                      int64_t srcDelayNs,
                      int64_t dstDelayNs)
{
    NS_LOG_FUNCTION(this << flowId << srcNode << dstNode << bytes << connection);
    NS_ASSERT_MSG(bytes > 0, "empty message");
    uint64_t key = connection >= 0 ? (1ULL << 63) | static_cast<uint64_t>(connection)
                                   : (static_cast<uint64_t>(srcGpu) << 32) | dstGpu;
    uint32_t conn = OpenConnection(key, flowId, srcNode, dstNode);
    NS_ASSERT_MSG(m_conns[conn].srcNode == srcNode && m_conns[conn].dstNode == dstNode,
                  "messages of one connection share their endpoints");
    uint32_t msg = m_nextMessage++;
    Message& m = m_messages[msg];
    m.flowId = flowId;
    m.conn = conn;
    m.bytes = bytes;
    m.dstDelayNs = dstDelayNs;
    m_flows[flowId] = FlowRecord{conn, bytes, m_conns[conn].firstFlow == flowId, false};
    Simulator::Schedule(NanoSeconds(srcDelayNs), &SocketTransport::Post, this, msg, bytes);
}

uint32_t
SocketTransport::OpenConnection(uint64_t key, uint32_t flowId, uint32_t srcNode, uint32_t dstNode)
{
    auto it = m_connOf.find(key);
    if (it != m_connOf.end())
    {
        return it->second;
    }
    EnsureStack(srcNode);
    EnsureStack(dstNode);
    uint32_t conn = static_cast<uint32_t>(m_conns.size());
    m_conns.push_back(Conn{srcNode, dstNode, flowId, {}, 0});
    m_connOf[key] = conn;
    uint32_t nSocks = GetDataSockets();
    for (uint32_t i = 0; i <= nSocks; ++i)
    {
        uint32_t s = OpenStream(conn, i);
        m_conns[conn].streams.push_back(s);
    }
    return conn;
}

uint32_t
SocketTransport::OpenStream(uint32_t conn, uint32_t socketIndex)
{
    const Conn& c = m_conns[conn];
    uint32_t s = static_cast<uint32_t>(m_streams.size());
    m_streams.emplace_back();
    Stream& st = m_streams.back();
    st.conn = conn;
    st.socket = socketIndex;
    Ptr<Socket> tx = Socket::CreateSocket(m_nodes[c.srcNode], TcpSocketFactory::GetTypeId());
    tx->SetAttribute("SndBufSize", UintegerValue(m_sndBuf));
    tx->SetAttribute("RcvBufSize", UintegerValue(m_rcvBuf));
    tx->SetAttribute("SegmentSize", UintegerValue(m_mtu - 52));
    tx->SetAttribute("InitialCwnd", UintegerValue(m_initialCwnd));
    tx->SetAttribute("MinRto", TimeValue(m_minRto));
    tx->SetAttribute("DelAckTimeout", TimeValue(m_delAckTimeout));
    tx->Bind();
    Address local;
    tx->GetSockName(local);
    uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
    m_pendingAccept[(static_cast<uint64_t>(c.srcNode) << 16) | port] = s;
    bool ok = tx->TraceConnectWithoutContext(
        "CongestionWindow", MakeBoundCallback(&SocketTransport::CwndChanged, this, s));
    ok = ok && tx->TraceConnectWithoutContext(
                   "Retransmission", MakeBoundCallback(&SocketTransport::Retransmitted, this, s));
    ok = ok && tx->TraceConnectWithoutContext(
                   "CongState", MakeBoundCallback(&SocketTransport::CongStateChanged, this, s));
    NS_ASSERT_MSG(ok, "TcpSocketBase trace sources not found");
    tx->SetSendCallback(MakeCallback(&SocketTransport::SendSpace, this));
    tx->Connect(InetSocketAddress(AddressOf(c.dstNode), LISTEN_PORT));
    st.tx = tx;
    m_streamOf[PeekPointer(tx)] = s;
    return s;
}

void
SocketTransport::Post(uint32_t msg, uint64_t bytes)
{
    Message& m = m_messages[msg];
    Conn& c = m_conns[m.conn];
    uint32_t nSocks = static_cast<uint32_t>(c.streams.size()) - 1;
    for (uint32_t st : c.streams)
    {
        m.from.push_back(m_streams[st].queued);
    }
    std::vector<uint32_t> touched;
    for (uint64_t offset = 0; offset < bytes; offset += m_requestBytes)
    {
        uint64_t size = std::min<uint64_t>(m_requestBytes, bytes - offset);
        uint32_t req = m_nextRequest++;
        m_requests[req] = Request{msg, 0};
        ++m.requests;
        Append(c.streams[0], SIZE_HEADER, req);
        touched.push_back(c.streams[0]);
        if (nSocks == 0)
        {
            Append(c.streams[0], size, req);
            continue;
        }
        uint64_t task = std::max<uint64_t>(m_minChunk, (size + nSocks - 1) / nSocks);
        for (uint64_t at = 0; at < size; at += task)
        {
            uint32_t s = c.streams[1 + c.nextSock];
            Append(s, std::min(task, size - at), req);
            touched.push_back(s);
            c.nextSock = (c.nextSock + 1) % nSocks;
        }
    }
    for (uint32_t st : c.streams)
    {
        m.to.push_back(m_streams[st].queued);
    }
    m.lastNs = Simulator::Now().GetNanoSeconds();
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint32_t s : touched)
    {
        Fill(s);
    }
}

void
SocketTransport::Append(uint32_t s, uint64_t bytes, uint32_t req)
{
    Stream& st = m_streams[s];
    st.queued += bytes;
    st.marks.emplace_back(st.queued, req);
    ++m_requests[req].parts;
}

void
SocketTransport::Fill(uint32_t s)
{
    Stream& st = m_streams[s];
    while (st.written < st.queued)
    {
        uint32_t room = st.tx->GetTxAvailable();
        if (room == 0)
        {
            return;
        }
        uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(room, st.queued - st.written));
        int sent = st.tx->Send(Create<Packet>(n));
        if (sent <= 0)
        {
            return;
        }
        st.written += static_cast<uint64_t>(sent);
    }
}

void
SocketTransport::SendSpace(Ptr<Socket> socket, uint32_t available)
{
    auto it = m_streamOf.find(PeekPointer(socket));
    if (it != m_streamOf.end())
    {
        Fill(it->second);
    }
}

void
SocketTransport::Accepted(Ptr<Socket> socket, const Address& from)
{
    InetSocketAddress peer = InetSocketAddress::ConvertFrom(from);
    uint32_t srcNode = peer.GetIpv4().Get() - ADDRESS_BASE - 1;
    auto it = m_pendingAccept.find((static_cast<uint64_t>(srcNode) << 16) | peer.GetPort());
    NS_ASSERT_MSG(it != m_pendingAccept.end(), "accepted a connection nobody opened");
    uint32_t s = it->second;
    m_pendingAccept.erase(it);
    m_streams[s].rx = socket;
    m_streamOf[PeekPointer(socket)] = s;
    socket->SetRecvCallback(MakeCallback(&SocketTransport::Readable, this));
    Readable(socket);
}

void
SocketTransport::Readable(Ptr<Socket> socket)
{
    auto it = m_streamOf.find(PeekPointer(socket));
    NS_ASSERT_MSG(it != m_streamOf.end(), "data on an unknown socket");
    uint32_t s = it->second;
    Ptr<Packet> p;
    while ((p = socket->Recv()) && p->GetSize() > 0)
    {
        m_streams[s].received += p->GetSize();
    }
    while (!m_streams[s].marks.empty() && m_streams[s].marks.front().first <= m_streams[s].received)
    {
        uint32_t req = m_streams[s].marks.front().second;
        m_streams[s].marks.pop_front();
        PartDone(req);
    }
}

void
SocketTransport::PartDone(uint32_t req)
{
    auto rit = m_requests.find(req);
    NS_ASSERT(rit != m_requests.end());
    if (--rit->second.parts > 0)
    {
        return;
    }
    uint32_t msg = rit->second.message;
    m_requests.erase(rit);
    auto mit = m_messages.find(msg);
    NS_ASSERT(mit != m_messages.end());
    if (--mit->second.requests > 0)
    {
        return;
    }
    Message m = mit->second;
    m_messages.erase(mit);
    FlowRecord& rec = m_flows[m.flowId];
    rec.done = true;
    ++m_messagesDone;
    m_bytesDelivered += m.bytes;
    Simulator::Schedule(NanoSeconds(m.dstDelayNs), &SocketTransport::Deliver, this, m.flowId);
}

void
SocketTransport::Deliver(uint32_t flowId)
{
    m_done(flowId);
}

bool
SocketTransport::Transmit(Ptr<FabricIpDevice> dev, Ptr<Packet> packet)
{
    uint32_t src = dev->GetTopologyNode();
    Ipv4Header ip;
    packet->PeekHeader(ip);
    uint32_t dst = ip.GetDestination().Get() - ADDRESS_BASE - 1;
    NS_ASSERT_MSG(dst < m_nodes.size() && m_dev[dst],
                  "IPv4 packet to an unknown host " << ip.GetDestination());
    uint32_t hash = 0;
    if (m_ecmp && ip.GetProtocol() == TcpL4Protocol::PROT_NUMBER)
    {
        Ptr<Packet> copy = packet->Copy();
        copy->RemoveHeader(ip);
        TcpHeader tcp;
        copy->PeekHeader(tcp);
        uint32_t ports =
            (static_cast<uint32_t>(tcp.GetSourcePort()) << 16) | tcp.GetDestinationPort();
        hash = TopologyDescription::FlowHash(m_seed, ports, src, dst, 2);
    }
    const auto& links = m_desc->GetNextHops(src, dst);
    if (links.empty())
    {
        ++m_hostDrops; // no route left (a link fault): TCP retransmits once there is one again
        return false;
    }
    uint32_t link =
        links.size() == 1 ? links[0] : links[TopologyDescription::EcmpIndex(hash, 0, links.size())];
    QbbNetDevice* egress = nullptr;
    for (uint32_t gp : m_nodePorts[src])
    {
        if (gp / 2 == link)
        {
            egress = PeekPointer(m_portDev[gp]);
            break;
        }
    }
    NS_ASSERT_MSG(egress, "route leaves node " << src << " on a link it does not have");
    uint32_t wire = std::max(packet->GetSize() + ETHERNET_BYTES, MIN_FRAME) + m_phy;
    Ptr<NetDeviceQueue> txq = m_txQueue[src];
    if (!txq && egress->GetQueueBytes(m_priority) + wire > m_txQueueBytes)
    {
        ++m_hostDrops;
        return false;
    }
    RdmaFrame* f = m_pool->Alloc();
    f->type = RdmaFrame::IP;
    f->seq = m_nextKey++;
    f->dst = dst;
    f->hash = hash;
    f->wireBytes = wire;
    f->payload = packet->GetSize();
    f->priority = m_priority;
    f->hop = 1;
    // Not-ECT packets carry ce = 1 so that no marker counts them (ECN-only marking).
    f->ce = ip.GetEcn() == Ipv4Header::ECN_NotECT ? 1 : 0;
    m_inFlight.emplace(f->seq, packet);
    egress->Enqueue(f, m_priority);
    if (txq && egress->GetQueueBytes(m_priority) >= m_txQueueBytes)
    {
        txq->Stop(); // the queue disc holds the next packets until the ring drains
    }
    return true;
}

void
SocketTransport::PortDequeued(
    SocketTransport* self, uint32_t node, uint32_t port, const RdmaFrame* frame, uint64_t bytes)
{
    Ptr<NetDeviceQueue> txq = self->m_txQueue[node];
    if (frame->type == RdmaFrame::IP && txq->IsStopped() &&
        self->m_portDev[port]->GetQueueBytes(self->m_priority) < self->m_txQueueBytes)
    {
        txq->Wake();
    }
}

void
SocketTransport::ReceiveFrame(const RdmaFrame* frame, uint32_t node)
{
    auto it = m_inFlight.find(frame->seq);
    NS_ASSERT_MSG(it != m_inFlight.end(), "IP frame without its packet");
    Ptr<Packet> packet = it->second;
    m_inFlight.erase(it);
    NS_ASSERT_MSG(frame->dst == node && m_dev[node], "IP frame delivered to the wrong node");
    if (frame->ce)
    {
        Ipv4Header ip;
        packet->RemoveHeader(ip);
        if (ip.GetEcn() != Ipv4Header::ECN_NotECT)
        {
            ip.SetEcn(Ipv4Header::ECN_CE);
            ++m_ceDelivered;
        }
        packet->AddHeader(ip);
    }
    // ns-3's nodes take packets in their own simulation context (Node::ReceiveFromDevice).
    Simulator::ScheduleWithContext(
        m_nodes[node]->GetId(), Time(0), &FabricIpDevice::Receive, m_dev[node], packet);
}

void
SocketTransport::FrameDropped(SocketTransport* self, uint32_t port, const RdmaFrame* frame)
{
    if (frame->type != RdmaFrame::IP || self->m_inFlight.erase(frame->seq) == 0)
    {
        return;
    }
    ++self->m_fabricDrops;
    // A frame dropped from a NIC's own ring (a link fault flushing it) frees ring space: wake
    // the queue disc as a transmission would.
    uint32_t link = port / 2;
    uint32_t node = port % 2 == 0 ? self->m_desc->GetLinkA(link) : self->m_desc->GetLinkB(link);
    Ptr<NetDeviceQueue> txq = node < self->m_txQueue.size() ? self->m_txQueue[node] : nullptr;
    if (txq && txq->IsStopped() &&
        self->m_portDev[port]->GetQueueBytes(self->m_priority) < self->m_txQueueBytes)
    {
        txq->Wake();
    }
}

void
SocketTransport::CwndChanged(SocketTransport* self, uint32_t s, uint32_t oldCwnd, uint32_t newCwnd)
{
    Stream& st = self->m_streams[s];
    st.cwnd = newCwnd;
    st.maxCwnd = std::max(st.maxCwnd, newCwnd);
    int64_t every = self->m_cwndInterval.GetNanoSeconds();
    int64_t now = Simulator::Now().GetNanoSeconds();
    if (every > 0 && (newCwnd < oldCwnd || st.lastSampleNs < 0 || now - st.lastSampleNs >= every))
    {
        st.lastSampleNs = now;
        self->m_cwTime.push_back(now);
        self->m_cwStream.push_back(s);
        self->m_cwValue.push_back(newCwnd);
    }
    self->m_cwndTrace(s, oldCwnd, newCwnd);
}

void
SocketTransport::Retransmitted(SocketTransport* self,
                               uint32_t s,
                               Ptr<const Packet> packet,
                               const TcpHeader& header,
                               const Address& local,
                               const Address& peer,
                               Ptr<const TcpSocketBase> socket)
{
    ++self->m_streams[s].retransmits;
    ++self->m_retransmits;
    self->m_retxTrace(s);
}

void
SocketTransport::CongStateChanged(SocketTransport* self,
                                  uint32_t s,
                                  TcpSocketState::TcpCongState_t oldState,
                                  TcpSocketState::TcpCongState_t newState)
{
    if (newState == TcpSocketState::CA_LOSS && oldState != TcpSocketState::CA_LOSS)
    {
        ++self->m_streams[s].timeouts;
        ++self->m_timeouts;
        self->m_timeoutTrace(s);
    }
    else if (newState == TcpSocketState::CA_RECOVERY && oldState != TcpSocketState::CA_RECOVERY)
    {
        ++self->m_streams[s].recoveries;
        ++self->m_recoveries;
    }
}

bool
SocketTransport::HasFlow(uint32_t flowId) const
{
    return m_flows.count(flowId) > 0;
}

void
SocketTransport::GetFlowStats(uint32_t flowId,
                              uint64_t* retransmits,
                              uint64_t* timeouts,
                              uint64_t* delivered) const
{
    *retransmits = *timeouts = *delivered = 0;
    auto it = m_flows.find(flowId);
    if (it == m_flows.end())
    {
        return;
    }
    const FlowRecord& rec = it->second;
    *delivered = rec.done ? rec.bytes : 0;
    if (rec.first)
    {
        for (uint32_t s : m_conns[rec.conn].streams)
        {
            *retransmits += m_streams[s].retransmits;
            *timeouts += m_streams[s].timeouts;
        }
    }
}

uint64_t
SocketTransport::GetRetransmits() const
{
    return m_retransmits;
}

uint64_t
SocketTransport::GetTimeouts() const
{
    return m_timeouts;
}

uint64_t
SocketTransport::GetRecoveries() const
{
    return m_recoveries;
}

uint64_t
SocketTransport::GetHostDrops() const
{
    return m_hostDrops;
}

uint64_t
SocketTransport::GetCeDelivered() const
{
    return m_ceDelivered;
}

uint64_t
SocketTransport::GetFabricDrops() const
{
    return m_fabricDrops;
}

uint64_t
SocketTransport::GetMessagesDone() const
{
    return m_messagesDone;
}

uint64_t
SocketTransport::GetBytesDelivered() const
{
    return m_bytesDelivered;
}

uint32_t
SocketTransport::GetNStreams() const
{
    return static_cast<uint32_t>(m_streams.size());
}

void
SocketTransport::CopyStreamStats(uint32_t* firstFlow,
                                 uint32_t* srcNode,
                                 uint32_t* dstNode,
                                 uint32_t* socket,
                                 uint64_t* bytes,
                                 uint64_t* received,
                                 uint32_t* maxCwnd,
                                 uint32_t* lastCwnd,
                                 uint64_t* retransmits,
                                 uint64_t* timeouts,
                                 uint64_t* recoveries) const
{
    for (std::size_t i = 0; i < m_streams.size(); ++i)
    {
        const Stream& st = m_streams[i];
        const Conn& c = m_conns[st.conn];
        firstFlow[i] = c.firstFlow;
        srcNode[i] = c.srcNode;
        dstNode[i] = c.dstNode;
        socket[i] = st.socket;
        bytes[i] = st.queued;
        received[i] = st.received;
        maxCwnd[i] = st.maxCwnd;
        lastCwnd[i] = st.cwnd;
        retransmits[i] = st.retransmits;
        timeouts[i] = st.timeouts;
        recoveries[i] = st.recoveries;
    }
}

void
SocketTransport::AppendProgress(int64_t now,
                                std::vector<int64_t>& time,
                                std::vector<uint32_t>& flow,
                                std::vector<double>& rate,
                                std::vector<uint64_t>& received)
{
    std::vector<uint32_t> ids;
    ids.reserve(m_messages.size());
    for (const auto& [id, m] : m_messages)
    {
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end()); // message order, for deterministic output
    for (uint32_t id : ids)
    {
        Message& m = m_messages[id];
        if (m.from.empty())
        {
            continue; // not posted yet (host latency)
        }
        const Conn& c = m_conns[m.conn];
        uint64_t got = 0;
        for (std::size_t i = 0; i < c.streams.size(); ++i)
        {
            uint64_t r = m_streams[c.streams[i]].received;
            got += r <= m.from[i] ? 0 : std::min(r, m.to[i]) - m.from[i];
        }
        got = std::min(got, m.bytes); // the 4-byte size headers are not payload
        double bps = now > m.lastNs ? static_cast<double>(got - std::min(got, m.lastBytes)) * 8e9 /
                                          static_cast<double>(now - m.lastNs)
                                    : 0.0;
        time.push_back(now);
        flow.push_back(m.flowId);
        rate.push_back(bps);
        received.push_back(got);
        m.lastBytes = got;
        m.lastNs = now;
    }
}

uint64_t
SocketTransport::GetNCwndSamples() const
{
    return m_cwTime.size();
}

void
SocketTransport::CopyCwndSeries(int64_t* timeNs, uint32_t* stream, uint32_t* cwnd) const
{
    std::copy(m_cwTime.begin(), m_cwTime.end(), timeNs);
    std::copy(m_cwStream.begin(), m_cwStream.end(), stream);
    std::copy(m_cwValue.begin(), m_cwValue.end(), cwnd);
}

void
SocketTransport::DoDispose()
{
    for (auto& st : m_streams)
    {
        if (st.tx)
        {
            st.tx->SetSendCallback(MakeNullCallback<void, Ptr<Socket>, uint32_t>());
            st.tx->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
        }
        if (st.rx)
        {
            st.rx->SetRecvCallback(MakeNullCallback<void, Ptr<Socket>>());
        }
        st.tx = nullptr;
        st.rx = nullptr;
    }
    for (auto& l : m_listener)
    {
        if (l)
        {
            l->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                 MakeNullCallback<void, Ptr<Socket>, const Address&>());
        }
    }
    m_listener.clear();
    m_streamOf.clear();
    m_inFlight.clear();
    m_dev.clear();
    m_txQueue.clear();
    m_nodePorts.clear();
    m_portDev.clear();
    m_nodes.clear();
    m_desc = nullptr;
    m_done = MessageDoneCallback();
    Object::DoDispose();
}

} // namespace ns3
