/*
 * HeteroSim: TestSuite for the socket transport's pieces: the fabric IP interface, NCCL's
 * socket count, and ns-3's bulk TCP reference.
 */
#include "ns3/boolean.h"
#include "ns3/data-rate.h"
#include "ns3/fabric-ip-device.h"
#include "ns3/ipv4-l3-protocol.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/socket-transport.h"
#include "ns3/tcp-bulk-reference.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

using namespace ns3;

/** \brief Without a transmit hook, or for a non-IPv4 protocol, the interface refuses packets. */
class FabricIpDeviceRefusesTestCase : public TestCase
{
  public:
    FabricIpDeviceRefusesTestCase()
        : TestCase("the fabric IP interface hands IPv4 packets to its hook and refuses the rest")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<FabricIpDevice> dev = CreateObject<FabricIpDevice>();
        Ptr<Packet> p = Create<Packet>(100);
        NS_TEST_ASSERT_MSG_EQ(dev->Send(p, dev->GetBroadcast(), Ipv4L3Protocol::PROT_NUMBER),
                              false,
                              "no hook: refused");
        uint32_t handed = 0;
        dev->SetTransmitCallback(MakeCallback(+[](uint32_t* n, Ptr<FabricIpDevice>, Ptr<Packet>) {
                                     ++*n;
                                     return true;
                                 }).Bind(&handed));
        NS_TEST_ASSERT_MSG_EQ(
            dev->Send(p, dev->GetBroadcast(), Ipv4L3Protocol::PROT_NUMBER), true, "IPv4 accepted");
        NS_TEST_ASSERT_MSG_EQ(dev->Send(p, dev->GetBroadcast(), 0x86DD), false, "IPv6 refused");
        NS_TEST_ASSERT_MSG_EQ(handed, 1, "only the IPv4 packet reached the hook");
        NS_TEST_ASSERT_MSG_EQ(dev->NeedsArp(), false, "no ARP on the fabric");
        dev->Dispose();
    }
};

/** \brief Sockets per NCCL connection: threads x sockets per thread, capped at 64 as NCCL does. */
class NcclSocketCountTestCase : public TestCase
{
  public:
    NcclSocketCountTestCase()
        : TestCase("NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD data sockets, at most 64")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<SocketTransport> sock = CreateObject<SocketTransport>();
        NS_TEST_ASSERT_MSG_EQ(
            sock->GetDataSockets(), 0, "default: the control socket carries data");
        sock->SetAttribute("SocketNthreads", UintegerValue(2));
        sock->SetAttribute("NsocksPerThread", UintegerValue(8));
        NS_TEST_ASSERT_MSG_EQ(sock->GetDataSockets(), 16, "AWS: 2 x 8");
        sock->SetAttribute("SocketNthreads", UintegerValue(16));
        NS_TEST_ASSERT_MSG_EQ(sock->GetDataSockets(), 64, "16 x 8 capped to 16 x 4");
        sock->SetAttribute("SocketNthreads", UintegerValue(3));
        sock->SetAttribute("NsocksPerThread", UintegerValue(30));
        NS_TEST_ASSERT_MSG_EQ(sock->GetDataSockets(), 63, "3 x 30 capped to 3 x 21");
    }
};

/**
 * \brief The receivers' delayed-ACK timeout is Linux's 40 ms and below the minimum RTO, so a lone
 * segment is acknowledged before the sender's retransmission timer fires.
 */
class DelayedAckBeforeRtoTestCase : public TestCase
{
  public:
    DelayedAckBeforeRtoTestCase()
        : TestCase("the delayed-ACK timeout (40 ms) is shorter than the minimum RTO (200 ms)")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<SocketTransport> sock = CreateObject<SocketTransport>();
        TimeValue delAck;
        TimeValue minRto;
        sock->GetAttribute("TcpDelAckTimeout", delAck);
        sock->GetAttribute("TcpMinRto", minRto);
        NS_TEST_ASSERT_MSG_EQ(delAck.Get(), MilliSeconds(40), "Linux TCP_DELACK_MIN");
        NS_TEST_ASSERT_MSG_EQ(minRto.Get(), MilliSeconds(200), "Linux TCP_RTO_MIN");
        NS_TEST_ASSERT_MSG_LT(delAck.Get(), minRto.Get(), "ACK before the RTO");
    }
};

/** \brief ns-3's bulk TCP over point-to-point devices reaches the TCP line-rate goodput. */
class BulkReferenceGoodputTestCase : public TestCase
{
  public:
    BulkReferenceGoodputTestCase()
        : TestCase("a bulk TCP flow reaches rate x MSS / (MSS + 54) on point-to-point links")
    {
    }

  private:
    void
    DoRun() override
    {
        Ptr<TcpBulkReference> ref = CreateObject<TcpBulkReference>();
        ref->SetAttribute("DataRate", DataRateValue(DataRate("10Gbps")));
        ref->SetAttribute("Bytes", UintegerValue(8 << 20));
        NS_TEST_ASSERT_MSG_EQ(ref->Run(), true, "the transfer finished");
        NS_TEST_ASSERT_MSG_EQ(ref->GetBytesReceived(), 8 << 20, "every byte received");
        double lineRate = 10e9 * 1448.0 / (1448.0 + 52.0 + 2.0);
        NS_TEST_ASSERT_MSG_GT(ref->GetGoodputBps(), 0.95 * lineRate, "near line rate");
        NS_TEST_ASSERT_MSG_LT(ref->GetGoodputBps(), 1.001 * lineRate, "not above line rate");
        NS_TEST_ASSERT_MSG_GT(ref->GetMaxCwnd(), 10 * 1448, "the window grew");
    }
};

/** \brief The socket transport's TestSuite. */
class SocketTransportTestSuite : public TestSuite
{
  public:
    SocketTransportTestSuite()
        : TestSuite("heterosim-socket-transport", Type::UNIT)
    {
        AddTestCase(new FabricIpDeviceRefusesTestCase, Duration::QUICK);
        AddTestCase(new NcclSocketCountTestCase, Duration::QUICK);
        AddTestCase(new DelayedAckBeforeRtoTestCase, Duration::QUICK);
        AddTestCase(new BulkReferenceGoodputTestCase, Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static SocketTransportTestSuite g_socketTransportTestSuite;
