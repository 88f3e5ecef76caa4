/*
 * HeteroSim: the goodput of one bulk TCP flow on ns-3's stock devices, as a reference.
 */
#include "tcp-bulk-reference.h"

#include "ns3/application-container.h"
#include "ns3/boolean.h"
#include "ns3/bulk-send-application.h"
#include "ns3/bulk-send-helper.h"
#include "ns3/config.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/log.h"
#include "ns3/net-device-container.h"
#include "ns3/node-container.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-socket-base.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("TcpBulkReference");
NS_OBJECT_ENSURE_REGISTERED(TcpBulkReference);

TypeId
TcpBulkReference::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::TcpBulkReference")
            .SetParent<Object>()
            .SetGroupName("Heterosim")
            .AddConstructor<TcpBulkReference>()
            .AddAttribute("DataRate",
                          "Rate of both links",
                          DataRateValue(DataRate("10Gbps")),
                          MakeDataRateAccessor(&TcpBulkReference::m_rate),
                          MakeDataRateChecker())
            .AddAttribute("Delay",
                          "Propagation delay of each link",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&TcpBulkReference::m_delay),
                          MakeTimeChecker())
            .AddAttribute("Bytes",
                          "Bytes to transfer",
                          UintegerValue(64 << 20),
                          MakeUintegerAccessor(&TcpBulkReference::m_bytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("TcpCongestionControl",
                          "TypeId name of the congestion control",
                          StringValue("ns3::TcpCubic"),
                          MakeStringAccessor(&TcpBulkReference::m_tcpType),
                          MakeStringChecker())
            .AddAttribute("SegmentSize",
                          "TCP segment payload, bytes",
                          UintegerValue(1448),
                          MakeUintegerAccessor(&TcpBulkReference::m_segment),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("SndBufSize",
                          "TCP send buffer, bytes",
                          UintegerValue(4194304),
                          MakeUintegerAccessor(&TcpBulkReference::m_sndBuf),
                          MakeUintegerChecker<uint32_t>(1024))
            .AddAttribute("RcvBufSize",
                          "TCP receive buffer, bytes",
                          UintegerValue(6291456),
                          MakeUintegerAccessor(&TcpBulkReference::m_rcvBuf),
                          MakeUintegerChecker<uint32_t>(1024))
            .AddAttribute("InitialCwnd",
                          "TCP initial window, segments",
                          UintegerValue(10),
                          MakeUintegerAccessor(&TcpBulkReference::m_initialCwnd),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("MinRto",
                          "TCP minimum RTO",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&TcpBulkReference::m_minRto),
                          MakeTimeChecker())
            .AddAttribute("QueuePackets",
                          "Device transmit queue, packets",
                          UintegerValue(1000),
                          MakeUintegerAccessor(&TcpBulkReference::m_queuePackets),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("Bidirectional",
                          "Also send Bytes the other way at the same time (each direction then "
                          "carries the other's ACKs, as in a 2-rank all-reduce); the goodput is "
                          "the mean of the two directions",
                          BooleanValue(false),
                          MakeBooleanAccessor(&TcpBulkReference::m_bidirectional),
                          MakeBooleanChecker())
            .AddAttribute("StopTime",
                          "Give up after this simulated time",
                          TimeValue(Seconds(60)),
                          MakeTimeAccessor(&TcpBulkReference::m_stop),
                          MakeTimeChecker());
    return tid;
}

TcpBulkReference::TcpBulkReference()
{
    NS_LOG_FUNCTION(this);
}

TcpBulkReference::~TcpBulkReference()
{
    NS_LOG_FUNCTION(this);
}

bool
TcpBulkReference::Run()
{
    TypeId cc;
    if (!TypeId::LookupByNameFailSafe(m_tcpType, &cc) ||
        !cc.IsChildOf(TypeId::LookupByName("ns3::TcpCongestionOps")))
    {
        return false;
    }
    Simulator::Destroy();
    m_received = 0;
    m_lastRxNs = -1;
    m_maxCwnd = 0;
    m_retransmits = 0;
    {
        NodeContainer nodes = BuildNetwork(cc);
        SocketDefaults previous = SetSocketDefaults();
        std::vector<ApplicationContainer> senders = InstallTransfers(nodes);
        Simulator::Schedule(NanoSeconds(1), [this, senders]() { ConnectSenderTraces(senders); });
        Simulator::Stop(m_stop);
        Simulator::Run();
        RestoreSocketDefaults(previous);
    }
    Simulator::Destroy();
    return m_received >= m_bytes * (m_bidirectional ? 2 : 1);
}

NodeContainer
TcpBulkReference::BuildNetwork(TypeId cc) const
{
    NodeContainer nodes;
    nodes.Create(3);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(m_rate));
    p2p.SetChannelAttribute("Delay", TimeValue(m_delay));
    p2p.SetQueue("ns3::DropTailQueue<Packet>",
                 "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, m_queuePackets)));
    NetDeviceContainer left = p2p.Install(nodes.Get(0), nodes.Get(1));
    NetDeviceContainer right = p2p.Install(nodes.Get(1), nodes.Get(2));
    InternetStackHelper stack;
    stack.SetIpv6StackInstall(false);
    stack.Install(nodes);
    Ipv4AddressHelper addresses;
    addresses.SetBase("10.1.1.0", "255.255.255.0");
    addresses.Assign(left);
    addresses.SetBase("10.1.2.0", "255.255.255.0");
    addresses.Assign(right);
    // No queue disc: packets go straight to the device queue, as on the fabric's NICs.
    TrafficControlHelper tc;
    tc.Uninstall(left);
    tc.Uninstall(right);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    for (uint32_t i = 0; i < nodes.GetN(); ++i)
    {
        nodes.Get(i)->GetObject<TcpL4Protocol>()->SetAttribute("SocketType", TypeIdValue(cc));
    }
    return nodes;
}

TcpBulkReference::SocketDefaults
TcpBulkReference::SetSocketDefaults() const
{
    // The applications create their sockets when they start: set the socket defaults for
    // this run and put the previous ones back afterwards.
    const std::pair<std::string, Ptr<AttributeValue>> settings[] = {
        {"ns3::TcpSocket::SegmentSize", Create<UintegerValue>(m_segment)},
        {"ns3::TcpSocket::SndBufSize", Create<UintegerValue>(m_sndBuf)},
        {"ns3::TcpSocket::RcvBufSize", Create<UintegerValue>(m_rcvBuf)},
        {"ns3::TcpSocket::InitialCwnd", Create<UintegerValue>(m_initialCwnd)},
        {"ns3::TcpSocketBase::MinRto", Create<TimeValue>(m_minRto)}};
    SocketDefaults previous;
    for (const auto& [name, value] : settings)
    {
        std::size_t cut = name.rfind("::");
        TypeId::AttributeInformation info;
        TypeId::LookupByName(name.substr(0, cut))
            .LookupAttributeByName(name.substr(cut + 2), &info);
        previous.emplace_back(name, info.initialValue);
        Config::SetDefault(name, *value);
    }
    return previous;
}

void
TcpBulkReference::RestoreSocketDefaults(const SocketDefaults& previous)
{
    for (const auto& [name, value] : previous)
    {
        Config::SetDefault(name, *value);
    }
}

std::vector<ApplicationContainer>
TcpBulkReference::InstallTransfers(const NodeContainer& nodes)
{
    uint16_t port = 5000;
    uint32_t directions = m_bidirectional ? 2 : 1;
    std::vector<ApplicationContainer> senders;
    for (uint32_t d = 0; d < directions; ++d)
    {
        Ptr<Node> from = nodes.Get(d == 0 ? 0 : 2);
        Ptr<Node> to = nodes.Get(d == 0 ? 2 : 0);
        Ipv4Address toAddress = to->GetObject<Ipv4>()->GetAddress(1, 0).GetLocal();
        PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                    InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sinkApp = sinkHelper.Install(to);
        sinkApp.Get(0)->TraceConnectWithoutContext("Rx",
                                                   MakeCallback(&TcpBulkReference::Received, this));
        BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(toAddress, port));
        bulk.SetAttribute("MaxBytes", UintegerValue(m_bytes));
        bulk.SetAttribute("SendSize", UintegerValue(m_segment * 64));
        ApplicationContainer sendApp = bulk.Install(from);
        sinkApp.Start(Time(0));
        sendApp.Start(Time(0));
        senders.push_back(sendApp);
    }
    return senders;
}

void
TcpBulkReference::ConnectSenderTraces(const std::vector<ApplicationContainer>& senders)
{
    for (const auto& sendApp : senders)
    {
        Ptr<BulkSendApplication> app = DynamicCast<BulkSendApplication>(sendApp.Get(0));
        Ptr<TcpSocketBase> socket = DynamicCast<TcpSocketBase>(app->GetSocket());
        if (!socket)
        {
            continue;
        }
        socket->TraceConnectWithoutContext("CongestionWindow",
                                           MakeCallback(&TcpBulkReference::Cwnd, this));
        socket->TraceConnectWithoutContext("Retransmission",
                                           MakeCallback(+[](uint64_t* n,
                                                            Ptr<const Packet>,
                                                            const TcpHeader&,
                                                            const Address&,
                                                            const Address&,
                                                            Ptr<const TcpSocketBase>) {
                                               ++*n;
                                           }).Bind(&m_retransmits));
    }
}

void
TcpBulkReference::Received(Ptr<const Packet> packet, const Address& from)
{
    m_received += packet->GetSize();
    m_lastRxNs = Simulator::Now().GetNanoSeconds();
    if (m_received >= m_bytes * (m_bidirectional ? 2 : 1))
    {
        Simulator::Stop();
    }
}

void
TcpBulkReference::Cwnd(uint32_t oldCwnd, uint32_t newCwnd)
{
    m_maxCwnd = std::max(m_maxCwnd, newCwnd);
}

int64_t
TcpBulkReference::GetTransferNs() const
{
    return m_lastRxNs;
}

uint64_t
TcpBulkReference::GetBytesReceived() const
{
    return m_received;
}

double
TcpBulkReference::GetGoodputBps() const
{
    double perDirection = static_cast<double>(m_received) / (m_bidirectional ? 2.0 : 1.0);
    return m_lastRxNs > 0 ? perDirection * 8e9 / static_cast<double>(m_lastRxNs) : 0.0;
}

uint32_t
TcpBulkReference::GetMaxCwnd() const
{
    return m_maxCwnd;
}

uint64_t
TcpBulkReference::GetRetransmits() const
{
    return m_retransmits;
}

double
TcpBulkReference::GetFramingRatio() const
{
    double packet = static_cast<double>(m_segment) + 52.0;
    return (packet + 2.0) / (packet + 38.0);
}

} // namespace ns3
