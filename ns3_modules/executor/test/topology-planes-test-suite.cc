/*
 * HeteroSim: TestSuite for multi-plane and rail-only routing in TopologyDescription.
 */
#include "ns3/fluid-network.h"
#include "ns3/test.h"
#include "ns3/topology-description.h"

#include <cstdint>
#include <set>
#include <vector>

using namespace ns3;

namespace
{

/** Nodes, links and routes of a small hand-built topology. */
struct Graph
{
    std::vector<uint8_t> kind;  //!< node kinds
    std::vector<int32_t> host;  //!< node hosts
    std::vector<int32_t> a;     //!< link ends
    std::vector<int32_t> b;     //!< link ends
    std::vector<double> rate;   //!< link rates
    std::vector<int64_t> delay; //!< link delays
    std::vector<uint8_t> lkind; //!< link kinds
    std::vector<int32_t> rnode; //!< route entry node
    std::vector<int32_t> rdst;  //!< route entry destination
    std::vector<int64_t> rptr{0};
    std::vector<int32_t> rlink; //!< route links

    /** \param k kind \param h host \return the new node */
    int32_t
    Node(uint8_t k, int32_t h)
    {
        kind.push_back(k);
        host.push_back(h);
        return static_cast<int32_t>(kind.size() - 1);
    }

    /** \param x end \param y end \param k kind \return the new link */
    int32_t
    Link(int32_t x, int32_t y, uint8_t k)
    {
        a.push_back(x);
        b.push_back(y);
        rate.push_back(400e9);
        delay.push_back(1000);
        lkind.push_back(k);
        return static_cast<int32_t>(a.size() - 1);
    }

    /** One ECMP entry with one next hop. \param node from \param dst towards \param link by */
    void
    Route(int32_t node, int32_t dst, int32_t link)
    {
        rnode.push_back(node);
        rdst.push_back(dst);
        rlink.push_back(link);
        rptr.push_back(static_cast<int64_t>(rlink.size()));
    }

    /** \return the description of this graph */
    Ptr<TopologyDescription>
    Describe(const std::vector<int32_t>& gpus, const std::vector<int32_t>& nics) const
    {
        Ptr<TopologyDescription> d = CreateObject<TopologyDescription>();
        d->SetNodes(kind.size(), kind.data(), host.data());
        d->SetLinks(a.size(), a.data(), b.data(), rate.data(), delay.data(), lkind.data());
        d->SetGpus(gpus.size(), gpus.data(), nics.data());
        d->SetRoutes(rnode.size(), rnode.data(), rdst.data(), rptr.data(), rlink.data());
        return d;
    }
};

/**
 * \brief Rail-only: two hosts of two GPUs (NVSwitch), GPU i's NIC on rail switch i, no spine.
 * A flow between rails crosses NVLink to the GPU of the destination's rail and leaves by its
 * NIC; a downed link makes the flow wait instead of finding another detour.
 */
class RailOnlyPxnTestCase : public TestCase
{
  public:
    RailOnlyPxnTestCase()
        : TestCase("rail-only: cross-rail flows go over NVLink to the right rail first")
    {
    }

  private:
    void
    DoRun() override
    {
        using T = TopologyDescription;
        Graph g;
        int32_t gpu[2][2];
        int32_t nic[2][2];
        int32_t nvs[2];
        int32_t toNvs[2][2];
        int32_t pcie[2][2];
        int32_t access[2][2];
        for (int32_t h = 0; h < 2; ++h)
        {
            gpu[h][0] = g.Node(T::GPU, h);
            gpu[h][1] = g.Node(T::GPU, h);
            nvs[h] = g.Node(T::NVSWITCH, h);
            nic[h][0] = g.Node(T::NIC, h);
            nic[h][1] = g.Node(T::NIC, h);
        }
        int32_t rail[2] = {g.Node(T::LEAF, -1), g.Node(T::LEAF, -1)};
        for (int32_t h = 0; h < 2; ++h)
        {
            for (int32_t i = 0; i < 2; ++i)
            {
                toNvs[h][i] = g.Link(gpu[h][i], nvs[h], T::NVLINK);
                pcie[h][i] = g.Link(gpu[h][i], nic[h][i], T::PCIE);
                access[h][i] = g.Link(nic[h][i], rail[i], T::ACCESS);
            }
        }
        for (int32_t h = 0; h < 2; ++h)
        {
            for (int32_t i = 0; i < 2; ++i)
            {
                g.Route(gpu[h][i], gpu[h][1 - i], toNvs[h][i]);
                g.Route(nvs[h], gpu[h][i], toNvs[h][i]);
                g.Route(gpu[h][i], nic[h][i], pcie[h][i]);
                g.Route(nic[h][i], gpu[h][i], pcie[h][i]);
                g.Route(nic[h][i], nic[1 - h][i], access[h][i]);
                g.Route(rail[i], nic[h][i], access[h][i]);
            }
        }
        Ptr<T> d = g.Describe({gpu[0][0], gpu[0][1], gpu[1][0], gpu[1][1]},
                              {nic[0][0], nic[0][1], nic[1][0], nic[1][1]});

        // same rail: no NVLink
        std::vector<uint32_t> same = d->GetPath(0, 2, 7);
        std::vector<uint32_t> sameWant = {static_cast<uint32_t>(pcie[0][0]),
                                          static_cast<uint32_t>(access[0][0]),
                                          static_cast<uint32_t>(access[1][0]),
                                          static_cast<uint32_t>(pcie[1][0])};
        NS_TEST_ASSERT_MSG_EQ((same == sameWant), true, "a same-rail flow takes its own NIC");
        // GPU 0 of host 0 to GPU 1 of host 1: NVLink to GPU 1 of host 0, then rail 1
        std::vector<uint32_t> cross = d->GetPath(0, 3, 7);
        std::vector<uint32_t> crossWant = {static_cast<uint32_t>(toNvs[0][0]),
                                           static_cast<uint32_t>(toNvs[0][1]),
                                           static_cast<uint32_t>(pcie[0][1]),
                                           static_cast<uint32_t>(access[0][1]),
                                           static_cast<uint32_t>(access[1][1]),
                                           static_cast<uint32_t>(pcie[1][1])};
        NS_TEST_ASSERT_MSG_EQ((cross == crossWant), true, "a cross-rail flow goes by NVLink first");
        uint32_t proxy = 0;
        auto ends = d->GetFlowNics(0, 3, 7, -1, &proxy);
        NS_TEST_ASSERT_MSG_EQ(proxy, 1u, "GPU 1 of the source host forwards");
        NS_TEST_ASSERT_MSG_EQ(ends.first, static_cast<uint32_t>(nic[0][1]), "leaves by rail 1");
        NS_TEST_ASSERT_MSG_EQ(ends.second, static_cast<uint32_t>(nic[1][1]), "enters by rail 1");

        // a fault on rail 1 at the source: the flow waits for it, no other detour
        d->SetLinkUp(access[0][1], false);
        d->RecomputeFabricRoutes();
        NS_TEST_ASSERT_MSG_EQ(d->GetPath(0, 3, 7).empty(), true, "no path while rail 1 is down");
        NS_TEST_ASSERT_MSG_EQ(d->GetPath(0, 2, 7).size(), 4u, "rail 0 still carries its flows");
        d->SetLinkUp(access[0][1], true);
        d->RecomputeFabricRoutes();
        NS_TEST_ASSERT_MSG_EQ((d->GetPath(0, 3, 7) == crossWant), true, "the path returns");
    }
};

/**
 * \brief Two planes: two hosts of one GPU with one NIC port per plane. A flow stays on its
 * plane; a flow with no plane hashes to one; the networks keep the plane per flow id.
 */
class TwoPlanesTestCase : public TestCase
{
  public:
    TwoPlanesTestCase()
        : TestCase("two planes: a flow stays on the plane it is given")
    {
    }

  private:
    void
    DoRun() override
    {
        using T = TopologyDescription;
        Graph g;
        int32_t gpu[2];
        int32_t port[2][2];
        int32_t pcie[2][2];
        int32_t access[2][2];
        for (int32_t h = 0; h < 2; ++h)
        {
            gpu[h] = g.Node(T::GPU, h);
            port[h][0] = g.Node(T::NIC, h);
            port[h][1] = g.Node(T::NIC, h);
        }
        int32_t leaf[2] = {g.Node(T::LEAF, -1), g.Node(T::LEAF, -1)}; // one per plane
        for (int32_t h = 0; h < 2; ++h)
        {
            for (int32_t p = 0; p < 2; ++p)
            {
                pcie[h][p] = g.Link(gpu[h], port[h][p], T::PCIE);
                access[h][p] = g.Link(port[h][p], leaf[p], T::ACCESS);
            }
        }
        for (int32_t h = 0; h < 2; ++h)
        {
            for (int32_t p = 0; p < 2; ++p)
            {
                g.Route(gpu[h], port[h][p], pcie[h][p]);
                g.Route(port[h][p], gpu[h], pcie[h][p]);
                g.Route(port[h][p], port[1 - h][p], access[h][p]);
                g.Route(leaf[p], port[h][p], access[h][p]);
            }
        }
        Ptr<T> d = g.Describe({gpu[0], gpu[1]}, {port[0][0], port[1][0]});
        int32_t planeNics[4] = {port[0][0], port[0][1], port[1][0], port[1][1]};
        d->SetGpuPlanes(2, planeNics);
        NS_TEST_ASSERT_MSG_EQ(d->GetNPlanes(), 2u, "two planes");
        for (int32_t p = 0; p < 2; ++p)
        {
            std::vector<uint32_t> want = {static_cast<uint32_t>(pcie[0][p]),
                                          static_cast<uint32_t>(access[0][p]),
                                          static_cast<uint32_t>(access[1][p]),
                                          static_cast<uint32_t>(pcie[1][p])};
            for (uint32_t hash = 0; hash < 16; ++hash)
            {
                NS_TEST_ASSERT_MSG_EQ(
                    (d->GetPath(0, 1, hash, p) == want), true, "stays on its plane");
            }
        }
        std::set<uint32_t> seen;
        for (uint32_t hash = 0; hash < 64; ++hash)
        {
            uint32_t expected = T::EcmpIndex(hash, T::PLANE_HOP, 2);
            auto ends = d->GetFlowNics(0, 1, hash, -1);
            NS_TEST_ASSERT_MSG_EQ(
                ends.first, static_cast<uint32_t>(port[0][expected]), "hashed plane");
            NS_TEST_ASSERT_MSG_EQ(
                ends.second, static_cast<uint32_t>(port[1][expected]), "same plane");
            seen.insert(expected);
        }
        NS_TEST_ASSERT_MSG_EQ(seen.size(), 2u, "hashing reaches both planes");

        Ptr<FluidNetwork> net = CreateObject<FluidNetwork>();
        int8_t planes[3] = {1, -1, 0};
        net->SetFlowPlanes(3, planes);
        NS_TEST_ASSERT_MSG_EQ(net->GetFlowPlane(0), 1, "plane of flow 0");
        NS_TEST_ASSERT_MSG_EQ(net->GetFlowPlane(1), -1, "flow 1 has none");
        NS_TEST_ASSERT_MSG_EQ(net->GetFlowPlane(2), 0, "plane of flow 2");
        NS_TEST_ASSERT_MSG_EQ(net->GetFlowPlane(9), -1, "a flow not given has none");
    }
};

} // namespace

/** \brief Multi-plane and rail-only routing TestSuite. */
class TopologyPlanesTestSuite : public TestSuite
{
  public:
    TopologyPlanesTestSuite()
        : TestSuite("heterosim-topology-planes", Type::UNIT)
    {
        AddTestCase(new RailOnlyPxnTestCase(), Duration::QUICK);
        AddTestCase(new TwoPlanesTestCase(), Duration::QUICK);
    }
};

/** Static instance: registers the suite with ns-3's test runner. */
static TopologyPlanesTestSuite g_topologyPlanesTestSuite;
