/*
 * HeteroSim: the network graph and routes shared by the packet and the flow network models.
 */
#ifndef HETEROSIM_TOPOLOGY_DESCRIPTION_H
#define HETEROSIM_TOPOLOGY_DESCRIPTION_H

#include "ns3/object.h"

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * \brief Nodes, full-duplex links and ECMP next-hop tables, as built by
 * heterosim/engine/topology.py (see that module for the construction rules).
 *
 * Filled in bulk from arrays; read by the network models. Node kinds and link kinds use the
 * same numbering as the Python module. A route entry gives, for (node, destination endpoint),
 * the set of equal-cost outgoing links. Paths between GPUs on different hosts go
 * GPU -> its NIC (host routes), NIC -> NIC (fabric routes), NIC -> GPU (host routes).
 */
class TopologyDescription : public Object
{
  public:
    /** Node kinds (same numbers as heterosim.engine.topology). */
    enum NodeKind : uint8_t
    {
        GPU = 0,
        NVSWITCH = 1,
        PCIE_SWITCH = 2,
        PCIE_ROOT = 3,
        NIC = 4,
        LEAF = 5,
        SPINE = 6
    };

    /** Link kinds (same numbers as heterosim.engine.topology). */
    enum LinkKind : uint8_t
    {
        NVLINK = 0,
        PCIE = 1,
        ACCESS = 2,
        FABRIC = 3
    };

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    TopologyDescription();

    /**
     * \brief Set the nodes.
     * \param n number of nodes
     * \param kind node kind per node
     * \param host host index per node (-1 for fabric switches)
     */
    void SetNodes(uint32_t n, const uint8_t* kind, const int32_t* host);

    /**
     * \brief Set the links (full duplex; rate is per direction).
     * \param n number of links
     * \param a first end
     * \param b second end
     * \param rateBps rate per direction in bit/s
     * \param delayNs propagation delay in ns
     * \param kind link kind
     */
    void SetLinks(uint32_t n,
                  const int32_t* a,
                  const int32_t* b,
                  const double* rateBps,
                  const int64_t* delayNs,
                  const uint8_t* kind);

    /**
     * \brief Set the GPUs: node of each GPU and node of the NIC it uses.
     * \param n number of GPUs
     * \param gpuNode node id per GPU
     * \param nicNode NIC node id per GPU
     */
    void SetGpus(uint32_t n, const int32_t* gpuNode, const int32_t* nicNode);

    /**
     * \brief Set the NIC port of every GPU on every plane of a multi-plane fabric (the planes
     * are separate switch networks; a NIC port belongs to one). Without this call a fabric has
     * one plane and every GPU uses the NIC given to SetGpus().
     * \param planes number of planes (>= 1)
     * \param nicNodes NIC node per GPU and plane, row-major (GPU g, plane p at g * planes + p)
     */
    void SetGpuPlanes(uint32_t planes, const int32_t* nicNodes);
    /** \return number of planes of the fabric */
    uint32_t GetNPlanes() const;

    /**
     * \brief Set the ECMP next-hop tables (CSR, see heterosim.engine.topology.Topology).
     * \param entries number of (node, dst) entries
     * \param node node per entry
     * \param dst destination endpoint per entry
     * \param ptr CSR offsets (entries + 1 values)
     * \param links next-hop links
     */
    void SetRoutes(uint32_t entries,
                   const int32_t* node,
                   const int32_t* dst,
                   const int64_t* ptr,
                   const int32_t* links);

    /**
     * \brief Set which hosts use NCCL's socket transport (TCP) instead of RDMA; hosts not
     * given use RDMA. A flow between two hosts uses RDMA only if both ends have it.
     * \param n number of hosts
     * \param socket 1 for a socket host, 0 for an RDMA host, per host index
     */
    void SetHostTransports(uint32_t n, const uint8_t* socket);
    /** \param host a host index \return whether the host uses the socket transport */
    bool IsSocketHost(int32_t host) const;
    /** \return whether any host uses the socket transport */
    bool HasSocketHosts() const;
    /**
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \return true if the GPUs are on different hosts and either host is a socket host
     */
    bool UsesSocket(uint32_t srcGpu, uint32_t dstGpu) const;

    /**
     * \brief Mark a link up or down (a fault). Routes change only in RecomputeFabricRoutes().
     * \param link a link
     * \param up whether it carries traffic
     */
    void SetLinkUp(uint32_t link, bool up);
    /** \param link a link \return whether it is up */
    bool IsLinkUp(uint32_t link) const;
    /**
     * \brief Change a link's rate (a degraded link): what the models read for flows started
     * from now on.
     * \param link a link
     * \param rateBps rate per direction, bit/s
     */
    void SetLinkRateBps(uint32_t link, double rateBps);
    /**
     * \brief Recompute the fabric next hops (fabric switches and NICs towards NICs of other
     * hosts) over the links that are up: hop-count shortest paths with every equal-cost next
     * hop, no transit through NICs, as heterosim.engine.topology builds them. Next hops that
     * were in the original set keep their order and come first. With every link up the
     * original tables are restored exactly. A (node, NIC) pair with no path left gets no entry.
     * \return number of NICs that some other NIC can no longer reach
     */
    uint32_t RecomputeFabricRoutes();

    /** \return number of nodes */
    uint32_t GetNNodes() const;
    /** \return number of links */
    uint32_t GetNLinks() const;
    /** \return number of GPUs */
    uint32_t GetNGpus() const;

    /** \param node a node \return its kind */
    uint8_t GetNodeKind(uint32_t node) const;
    /** \param node a node \return its host, -1 for fabric switches */
    int32_t GetNodeHost(uint32_t node) const;
    /** \param link a link \return first end */
    uint32_t GetLinkA(uint32_t link) const;
    /** \param link a link \return second end */
    uint32_t GetLinkB(uint32_t link) const;
    /** \param link a link \return rate per direction, bit/s */
    double GetLinkRateBps(uint32_t link) const;
    /** \param link a link \return propagation delay, ns */
    int64_t GetLinkDelayNs(uint32_t link) const;
    /** \param link a link \return kind */
    uint8_t GetLinkKind(uint32_t link) const;
    /** \param link a link \param node one end \return the other end */
    uint32_t GetOtherEnd(uint32_t link, uint32_t node) const;
    /** \param gpu a GPU \return its node */
    uint32_t GetGpuNode(uint32_t gpu) const;
    /** \param gpu a GPU \return the node of the NIC it uses (on plane 0) */
    uint32_t GetGpuNicNode(uint32_t gpu) const;
    /** \param gpu a GPU \param plane a plane \return the node of its NIC port on that plane */
    uint32_t GetGpuNicNode(uint32_t gpu, uint32_t plane) const;
    /** \param node a node \return links attached to it */
    const std::vector<uint32_t>& GetNodeLinks(uint32_t node) const;

    /**
     * \brief Equal-cost next hops.
     * \param node current node
     * \param dst destination endpoint (GPU or NIC node)
     * \return the ECMP set of outgoing links (empty if none)
     */
    const std::vector<uint32_t>& GetNextHops(uint32_t node, uint32_t dst) const;

    /**
     * \brief Deterministic ECMP choice, identical to heterosim.engine.topology.ecmp_index.
     * \param flowHash the flow's hash
     * \param hop hop number along the path segment (0 = first)
     * \param choices size of the ECMP set
     * \return index in [0, choices)
     */
    static uint32_t EcmpIndex(uint32_t flowHash, uint32_t hop, uint32_t choices);

    /**
     * \brief The ECMP hash of a flow, shared by the packet and the fluid network so that both
     *        route a flow over the same links.
     * \param seed simulation seed
     * \param flowId the flow id
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \param salt 0 for the data direction, 1 for the acknowledgements of the packet network
     * \return the hash passed to GetPath
     */
    static uint32_t FlowHash(
        uint32_t seed, uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint32_t salt);

    /**
     * \brief The links of one GPU-to-GPU path, ECMP choices made by \p flowHash.
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \param flowHash the flow's hash
     * \return links in path order (empty when src == dst or unroutable)
     */
    std::vector<uint32_t> GetPath(uint32_t srcGpu, uint32_t dstGpu, uint32_t flowHash) const;

    /**
     * \brief The links of one GPU-to-GPU path on a given plane.
     *
     * Between hosts the path leaves through the source GPU's NIC port on \p plane and enters
     * through the destination GPU's port on the same plane (a plane is a separate network).
     * \p plane < 0 picks the plane from the flow hash (a bond hashing a queue pair to a port).
     * When the fabric has no route between the two ports (a rail-only fabric: no spine joins
     * the rails), the data first crosses the source host's NVLink/PCIe to the GPU whose port
     * reaches the destination port, and leaves through that GPU's port, as NCCL's PXN does.
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \param flowHash the flow's hash
     * \param plane the flow's plane, or -1
     * \return links in path order (empty when src == dst or unroutable)
     */
    std::vector<uint32_t> GetPath(uint32_t srcGpu,
                                  uint32_t dstGpu,
                                  uint32_t flowHash,
                                  int32_t plane) const;

    /**
     * \brief The link directions a flow between two hosts uses when the fabric switches spray
     * its packets, each with the share of the flow's bytes it carries.
     *
     * The host segments (GPU to NIC port, PXN hops) and the NIC port's first hop are GetPath's
     * choices for \p flowHash (share 1). From there every leaf and spine switch splits what
     * reaches it evenly over its equal-cost next hops towards the destination port, which is
     * where per-packet spraying (random or round-robin, per switch) converges over many packets.
     * On a symmetric fabric this is the even split over all equal-cost paths; after a fault it is
     * the hop-by-hop split the switches make over the routes that remain.
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU, on another host
     * \param flowHash the hash of the host segments and of the NIC port's uplink
     * \param plane the flow's plane, or -1
     * \param directions out: link directions (2 * link: a->b, 2 * link + 1: b->a), each once,
     * in the order a packet first meets them
     * \param shares out: share of the flow's bytes per direction, in (0, 1]
     * \return false when a hop has no route (the outputs are then incomplete)
     */
    bool GetSprayedDirections(uint32_t srcGpu,
                              uint32_t dstGpu,
                              uint32_t flowHash,
                              int32_t plane,
                              std::vector<uint32_t>& directions,
                              std::vector<double>& shares) const;

    /**
     * \brief The NIC ports a flow between two hosts leaves and enters by (GetPath's choice).
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU (on another host)
     * \param flowHash the flow's hash
     * \param plane the flow's plane, or -1
     * \param proxyGpu out: the GPU whose port the flow leaves by (srcGpu unless PXN is needed)
     * \return (source port node, destination port node)
     */
    std::pair<uint32_t, uint32_t> GetFlowNics(uint32_t srcGpu,
                                              uint32_t dstGpu,
                                              uint32_t flowHash,
                                              int32_t plane,
                                              uint32_t* proxyGpu = nullptr) const;

    /** ECMP "hop" number salting the plane choice of a flow with no plane (as in Python). */
    static constexpr uint32_t PLANE_HOP = 1000;

  private:
    /**
     * Append the link directions from \p node to \p dst, leaf and spine switches splitting
     * evenly over their next hops (GetSprayedDirections); false if a hop has no route.
     */
    bool SprayWalk(uint32_t node,
                   uint32_t dst,
                   uint32_t flowHash,
                   std::vector<uint32_t>& directions,
                   std::vector<double>& shares) const;
    /** Append the links from \p node to \p dst; false if a hop has no route. */
    bool Walk(uint32_t node, uint32_t dst, uint32_t flowHash, std::vector<uint32_t>& out) const;
    /** \param link a link \return whether it is an access or fabric link and is up */
    bool IsUpFabricLink(uint32_t link) const;
    /** \param node a node \return whether it is a NIC, leaf or spine (a fabric node) */
    bool IsFabricNode(uint32_t node) const;
    /**
     * Fill \p dist with the hop counts of every fabric node to NIC \p dst over the fabric links
     * that are up (-1: no path); NICs other than \p dst do not forward. \p queue is scratch.
     */
    void FabricHopCounts(uint32_t dst,
                         std::vector<int64_t>& dist,
                         std::vector<uint32_t>& queue) const;
    /**
     * The equal-cost next hops from \p node towards NIC \p dst under the hop counts \p dist
     * (FabricHopCounts): those of the original routes first, in their order, then new ones.
     */
    std::vector<uint32_t> FabricNextHops(uint32_t node,
                                         uint32_t dst,
                                         const std::vector<int64_t>& dist) const;

    std::vector<uint8_t> m_nodeKind;                //!< kind per node
    std::vector<int32_t> m_nodeHost;                //!< host per node
    std::vector<uint32_t> m_linkA;                  //!< first end per link
    std::vector<uint32_t> m_linkB;                  //!< second end per link
    std::vector<double> m_linkRate;                 //!< bit/s per direction
    std::vector<int64_t> m_linkDelay;               //!< ns
    std::vector<uint8_t> m_linkKind;                //!< kind per link
    std::vector<std::vector<uint32_t>> m_nodeLinks; //!< adjacency
    std::vector<uint32_t> m_gpuNode;                //!< node per GPU
    std::vector<uint32_t> m_gpuNic;                 //!< NIC node per GPU
    uint32_t m_planes{1};                           //!< planes of the fabric
    std::vector<uint32_t> m_gpuPlaneNic;            //!< NIC node per GPU and plane
    std::vector<std::vector<uint32_t>> m_hostGpus;  //!< GPUs of every host, in order
    std::vector<uint8_t> m_hostSocket;              //!< 1 per socket-transport host
    bool m_anySocket{false};                        //!< some host uses the socket transport
    std::unordered_map<uint64_t, std::vector<uint32_t>> m_routes; //!< (node<<32|dst) -> links
    std::unordered_map<uint64_t, std::vector<uint32_t>>
        m_baseRoutes;                //!< routes as set, once changed
    std::vector<uint8_t> m_linkUp;   //!< 1 = up (faults), empty = all up
    std::vector<uint32_t> m_noRoute; //!< empty set returned when unroutable
};

} // namespace ns3

#endif /* HETEROSIM_TOPOLOGY_DESCRIPTION_H */
