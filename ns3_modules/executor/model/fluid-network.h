/*
 * HeteroSim: fluid (flow-level) network with max-min fair bandwidth sharing.
 */
#ifndef HETEROSIM_FLUID_NETWORK_H
#define HETEROSIM_FLUID_NETWORK_H

#include "flow-network.h"
#include "topology-description.h"

#include "ns3/boolean.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/string.h"
#include "ns3/traced-callback.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * \brief Hand memory freed to the C library back to the system (glibc: malloc_trim), so that
 * large tables freed piece by piece lower the process's resident size; nothing elsewhere.
 */
void ReturnFreedMemory();

/**
 * \brief Flow-level network: every flow is a fluid that moves at its max-min fair rate.
 *
 * Flows follow the same routes as the packet network: the path of a flow is
 * TopologyDescription::GetPath(src, dst, TopologyDescription::FlowHash(Seed, flowId, src, dst, 0)),
 * the hash the packet network uses. Each direction of each link is a
 * resource whose capacity is the link rate. The rates of all active flows are max-min fair
 * (progressive filling). They are recomputed whenever flows start or finish; starts and finishes
 * at the same simulated instant are batched into one recomputation. Each flow's end-of-transfer
 * event is rescheduled when its rate changes.
 *
 * Recomputation is local and exact (attribute LocalRecompute, on by default). Every flow records
 * its bottleneck: the saturated resource that froze its rate, on which no flow is faster. A
 * recomputation re-fills only a set S of flows, against the capacity that the other (fixed)
 * flows leave: first the flows that started and the flows whose bottleneck a finished flow
 * left. The filling is then checked, and S grows and is filled again while either (1) a flow of
 * S was frozen on a resource where a fixed flow is faster (that flow joins S), or (2) a fixed
 * flow's bottleneck is a resource of S that is no longer saturated or on which S now goes faster
 * (the fixed flow joins S). When neither holds every flow has a bottleneck, which makes the
 * allocation the unique max-min one: fixed flows whose bottleneck S does not use keep it, the
 * others passed check (2), and flows of S got one from the filling and check (1). After
 * MaxLocalRounds growths the whole connected component is filled. Link loads are integer sums
 * of fixed-point rates (2^-44 byte/ns), so that adding and removing rates never drifts. With
 * LocalRecompute=false every recomputation re-fills the whole connected component (links joined
 * by shared flows) that the change touches, the textbook method; the two agree to rounding
 * (tested).
 *
 * A flow of B bytes on a path of hops k = 1..h (rate R_k, propagation delay D_k) finishes at
 *   start + (fluid transfer time at the max-min rates) + sum_k D_k + sum_k P/R_k - P/min_k R_k
 * with P = min(Mtu, B): the first packet is stored and forwarded at every hop, and the
 * serialization at the slowest hop is already part of the fluid transfer. For a lone flow this is
 * the exact completion time of a back-to-back packet stream without header overhead.
 * HeaderBytes (per Mtu of payload) scales the capacity of every network link (access and fabric
 * kinds; NVLink and PCIe links carry no RoCE frames) by Mtu / (Mtu + HeaderBytes).
 *
 * Connections (StartFlowOnConnection): the messages of one connection share one flow slot, as
 * work requests share one queue pair. A message posted while the connection's slot is still
 * transferring waits in the connection's FIFO; when a message's last byte leaves the source the
 * next one starts on the same slot at the same rate (no recomputation), and every message is
 * delivered its own path latency after its transfer ends. The connection's path is hashed from
 * the connection id, so all its messages take one path. A connection with nothing in transfer
 * is closed; its next message opens it again.
 *
 * Socket-transport flows (TopologyDescription::UsesSocket: between hosts, one end a socket
 * host) model NCCL's socket transport over TCP as a fluid: each payload byte costs
 * (SocketMss + SocketFrameOverhead) / SocketMss bytes of link capacity (TCP/IP and Ethernet
 * framing; capacity shares are max-min over wire bytes, as congestion control shares a link
 * by frames), and the first message of a NCCL connection waits one round trip (handshake) plus
 * the time slow start loses: k = ceil(log2(BDP / (SocketInitialCwnd x SocketMss))) round trips
 * minus what the growing window sends meanwhile at the bottleneck rate. Approximations: one
 * fluid flow per NCCL connection whatever NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (the
 * packet model opens that many TCP connections, which take that many shares of a shared link),
 * no congestion-window dynamics, losses or retransmissions after slow start, and the traffic
 * class is ignored as for every flow (the packet model serves TCP and RDMA classes round-robin).
 *
 * Spraying (attribute Spray): a flow between two hosts is one fluid spread over every
 * equal-cost fabric path, as packet spraying (network.load_balancing spray, spray_rr) and UET's
 * per-packet entropy spread a flow's packets over many packets: it uses each link direction with
 * the share of its bytes that TopologyDescription::GetSprayedDirections gives (leaf and spine
 * switches split evenly over their next hops), and the max-min filling weighs it so: a link's
 * load is the sum over its flows of rate x share, and a flow's rate rises until a link it uses
 * saturates. The route is the same for every flow of a (source GPU, destination GPU, plane) and
 * is stored once per such pair (host segments hashed with flow id 0). Its store-and-forward
 * latency and socket round trip are those of one of its paths (the paths are equal-cost).
 * APPROXIMATION: the even split is spraying's long-run average; it has no reordering cost (the
 * flow model refuses spraying over go-back-N) and no queues, so a flow sprayed over a degraded
 * link moves at the rate that link's share allows, as an oblivious sprayer's transport must.
 *
 * Approximations (what this model does not have): no queues and no queueing delay, no
 * congestion-control dynamics (rates converge instantly to max-min fairness), no packet loss,
 * retransmission or PFC, no traffic-class priorities (the priority argument is ignored), and the
 * latency terms above do not consume link capacity. A flow whose path has no hops (source equals
 * destination) or no route is counted as unroutable and never completes; the plan executor checks
 * routes before it runs, so that only stand-alone callers can hit this.
 */
class FluidNetwork : public FlowNetwork
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Trace signature of FlowStart: flow id, source GPU, destination GPU, bytes. */
    typedef void (*FlowStartCallback)(uint32_t, uint32_t, uint32_t, uint64_t);
    /** Trace signature of TransferDone: flow id. */
    typedef void (*FlowIdCallback)(uint32_t);
    /** Trace signature of RateChange: flow id, rate in bit/s. */
    typedef void (*RateCallback)(uint32_t, double);

    FluidNetwork();
    ~FluidNetwork() override;

    /**
     * \brief Set the topology and routes; must be called before the first flow starts.
     * \param topo the topology description
     */
    void SetTopology(Ptr<TopologyDescription> topo);

    // FlowNetwork
    void StartFlow(uint32_t flowId,
                   uint32_t srcGpu,
                   uint32_t dstGpu,
                   uint64_t bytes,
                   uint8_t priority) override;
    void StartFlowOnConnection(uint32_t flowId,
                               uint32_t srcGpu,
                               uint32_t dstGpu,
                               uint64_t bytes,
                               uint8_t priority,
                               uint32_t connection) override;
    uint32_t GetNGpus() const override;

    /**
     * \brief The hash that selects a flow's ECMP path: TopologyDescription::FlowHash of
     *        (Seed, flowId, srcGpu, dstGpu), as the packet network computes it; 0 when Ecmp is
     * false.
     * \param flowId the flow id
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \return the hash passed to TopologyDescription::GetPath
     */
    uint32_t FlowHash(uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu) const;

    /** \return number of flows started */
    uint64_t GetFlowsStarted() const;
    /** \return number of flows whose last byte has been delivered */
    uint64_t GetFlowsFinished() const;
    /** \return number of flows now moving data */
    uint64_t GetFlowsActive() const;
    /** \return number of (source, destination, plane) spray routes stored (Spray) */
    uint64_t GetSprayRoutes() const;
    /** \return number of flows that could not be routed (never complete) */
    uint64_t GetFlowsUnroutable() const;
    /** \return a description of the first unroutable flow, empty if none */
    std::string GetUnroutableMessage() const;
    /** \return bytes of payload delivered by finished flows */
    uint64_t GetBytesDelivered() const;
    /** \return number of max-min rate recomputations */
    uint64_t GetRecomputations() const;
    /** \return total number of flow rate assignments over all recomputations (work measure) */
    uint64_t GetRateAssignments() const;
    /** \return number of times a local recomputation had to grow its set and fill again */
    uint64_t GetSetGrowths() const;
    /** \return messages that had to wait behind another message of their connection */
    uint64_t GetMessagesQueued() const;

    /**
     * \brief Per-link-direction counters up to now: payload bytes carried and busy time (time with
     * at least one active flow). Entry 2*link is direction a->b, 2*link+1 is b->a. Bytes of
     * flows still in flight count as far as they have got.
     * \param bytes output, 2 * nLinks values
     * \param busyNs output, 2 * nLinks values
     */
    void CopyLinkStats(uint64_t* bytes, int64_t* busyNs) const;

    /**
     * \brief Record link-direction samples at every multiple of SampleInterval up to \p nowNs
     *        (inclusive): (time, direction, payload bytes carried so far) for each direction whose
     *        carried bytes changed since its previous sample. Rates are constant between two
     *        recomputations, so the values are exact; the model calls this before every rate
     *        change, the caller once at the end of a run. Nothing is recorded if SampleInterval is
     * 0.
     * \param nowNs simulated time in ns, not before the last call's
     */
    void SampleUntil(int64_t nowNs);

    /** \return number of (time, direction, bytes) link samples recorded */
    uint64_t GetNLinkSamples() const;

    /**
     * \brief Copy the link samples (GetNLinkSamples() entries each), in time order.
     * \param timeNs sample times, ns
     * \param direction link direction (2*link: a->b, 2*link+1: b->a)
     * \param bytes payload bytes the direction has carried up to the sample time
     */
    void CopyLinkSeries(int64_t* timeNs, uint32_t* direction, uint64_t* bytes) const;

    /** Free the link samples recorded so far (after copying them; sampling goes on). */
    void ReleaseLinkSeries();

    /**
     * \brief CopyLinkSeries then ReleaseLinkSeries, freeing each block of rows as soon as it is
     * copied and handing the memory back to the system (a series of tens of millions of rows is
     * not held twice at its full size).
     * \param timeNs sample time of each row, ns (GetNLinkSamples() values)
     * \param direction link direction of each row
     * \param bytes payload bytes the direction has carried up to the sample time
     */
    void TakeLinkSeries(int64_t* timeNs, uint32_t* direction, uint64_t* bytes);

    /** \return number of sample times that have at least one link-series row */
    uint64_t GetNLinkSampleTimes() const;

    /**
     * \brief Copy the sample times that have at least one row (GetNLinkSampleTimes() values,
     * increasing) and, per link direction (2 * nLinks values), the payload bytes of its last row
     * (0 without rows): the series' largest value per direction, its bytes carried up to the
     * last sample.
     */
    void CopyLinkSampleTimes(int64_t* timeNs, uint64_t* lastBytes) const;

    /**
     * \brief Drop the link-series rows of every direction but \p directions (one pass, in
     * place); the sample times stay (CopyLinkSampleTimes), GetNLinkSamples and CopyLinkSeries
     * then give the kept rows.
     * \param nDirections number of directions in \p directions
     * \param directions link directions to keep (any order)
     * \return number of rows kept
     */
    uint64_t KeepLinkSeriesOf(uint32_t nDirections, const uint32_t* directions);

    /**
     * \brief Take a link down or bring it back (a fault): its capacity is 0 while down; flows
     * on it wait at rate 0 until Reroute() moves them or the link returns. Rates are re-filled
     * over the whole affected component.
     * \param link a link
     * \param up whether it carries traffic
     */
    void SetLinkUp(uint32_t link, bool up) override;
    /**
     * \brief Recompute the topology's fabric routes over the links that are up, and move every
     * active flow whose path changes to its new path (the same hash over the remaining
     * equal-cost paths, as the packet network's switches re-hash). A flow left without any
     * path stays where it is, at rate 0, until its link returns.
     * \return number of active flows moved to another path
     */
    uint32_t Reroute() override;
    /**
     * \brief Change a link's rate (both directions) from now on; rates are re-filled.
     * \param link a link
     * \param rateBps new rate, bit/s
     */
    void SetLinkRate(uint32_t link, double rateBps) override;
    /**
     * \brief A lossy link: the fluid model has no packets to lose, so it scales the link's
     * capacity by \p goodputFactor, the share of the rate that survives loss and go-back-N
     * recovery (computed by the caller; see heterosim/engine/faults.py).
     * \param link a link
     * \param probability frame loss probability (recorded only)
     * \param goodputFactor capacity multiplier, 0..1
     */
    void SetLinkLoss(uint32_t link, double probability, double goodputFactor) override;
    /** \return active flows moved to another path by link faults so far */
    uint64_t GetFlowsRerouted() const;

    /**
     * \brief The current max-min rate of an active flow (a scan of the flow slots: for tests
     * and diagnostics; the network keeps no per-id table, so its memory does not grow with the
     * number of flows a run starts).
     * \param flowId the flow id
     * \return rate in bit/s; -1 if the flow is not moving data
     */
    double GetFlowRateBps(uint32_t flowId) const;

  protected:
    void DoDispose() override;

  private:
    /** One direction of one link. */
    struct Resource
    {
        double capacity{0};                               //!< bytes per ns
        int64_t capFx{0};                                 //!< capacity, fixed point
        int64_t tolFx{0};                                 //!< saturation tolerance, fixed point
        int64_t loadFx{0};                                //!< sum of flow rates, fixed point
        std::vector<std::pair<uint32_t, uint32_t>> flows; //!< (flow slot, hop index)
        uint64_t bytesDone{0};                            //!< bytes of finished flows
        int64_t busySince{-1};                            //!< ns, -1 when idle
        int64_t busyNs{0};                                //!< closed busy intervals
        uint64_t stamp{0};                                //!< visit mark: listed this round
        uint64_t expanded{0};                             //!< visit mark: all flows in the set
        bool capSet{false};                               //!< capacity initialised
        bool sampleListed{false};                         //!< in m_sampleActive or m_sampleJoined
    };

    /**
     * A column of the link series, stored in fixed-size blocks: appending never moves what is
     * stored (no reallocation copies), and memory grows by one block at a time.
     */
    template <typename T> class SeriesColumn
    {
      public:
        /** Append \p value. */
        void
        PushBack(T value)
        {
            if (m_blocks.empty() || m_blocks.back().size() == kBlock)
            {
                m_blocks.emplace_back();
                m_blocks.back().reserve(kBlock);
            }
            m_blocks.back().push_back(value);
            ++m_size;
        }

        /** \return number of values */
        uint64_t
        Size() const
        {
            return m_size;
        }

        /** Copy every value, in order, to \p out (Size() entries). */
        void
        CopyTo(T* out) const
        {
            for (const auto& block : m_blocks)
            {
                out = std::copy(block.begin(), block.end(), out);
            }
        }

        /** Copy every value to \p out, freeing each block once copied; then empty. */
        void
        MoveTo(T* out)
        {
            for (auto& block : m_blocks)
            {
                out = std::copy(block.begin(), block.end(), out);
                std::vector<T>().swap(block);
                ReturnFreedMemory();
            }
            Clear();
        }

        /** \return the value at \p i (< Size()) */
        T
        At(uint64_t i) const
        {
            return m_blocks[i / kBlock][i % kBlock];
        }

        /** Replace the value at \p i (< Size()) by \p value. */
        void
        Set(uint64_t i, T value)
        {
            m_blocks[i / kBlock][i % kBlock] = value;
        }

        /** Keep the first \p n (<= Size()) values, freeing the blocks no longer needed. */
        void
        Truncate(uint64_t n)
        {
            m_blocks.resize((n + kBlock - 1) / kBlock);
            if (!m_blocks.empty())
            {
                m_blocks.back().resize(n - (m_blocks.size() - 1) * kBlock);
            }
            m_size = n;
        }

        /** Drop every value and free the memory. */
        void
        Clear()
        {
            m_blocks.clear();
            m_blocks.shrink_to_fit();
            m_size = 0;
        }

      private:
        static constexpr size_t kBlock = size_t{1} << 20; //!< values per block
        std::vector<std::vector<T>> m_blocks;             //!< the values, kBlock per block
        uint64_t m_size{0};                               //!< number of values
    };

    /** One active flow. */
    struct Flow
    {
        uint32_t id{0};            //!< caller's flow id
        uint64_t bytes{0};         //!< payload size
        double remaining{0};       //!< bytes left to transfer
        double rate{0};            //!< bytes per ns
        double newRate{0};         //!< scratch: rate from the current filling
        int64_t rateFx{0};         //!< rate as counted in the link loads, fixed point
        uint32_t bottleneck{0};    //!< resource that limits the rate (froze it)
        uint32_t newBottleneck{0}; //!< scratch: bottleneck from the current filling
        int64_t lastUpdate{0};     //!< ns, when remaining was last brought up to date
        int64_t latencyNs{0};      //!< fixed latency added after the transfer
        std::vector<uint32_t> res; //!< resources along the path
        std::vector<uint32_t> pos; //!< index of this flow in each resource's list
        int64_t doneAt{0};         //!< ns, end of the fluid transfer at the current rate
        uint64_t doneSeq{0};       //!< order among flows ending at the same ns
        int32_t heapPos{-1};       //!< index in m_doneHeap, -1 when not scheduled
        uint64_t stamp{0};         //!< visit mark: in the set being re-filled
        bool frozen{false};        //!< rate fixed in the current water-filling
        bool inUse{false};         //!< slot holds an active flow
        bool onConnection{false};  //!< the slot carries the messages of a connection
        uint32_t connection{0};    //!< that connection's id
        double scale{1.0};   //!< bytes transferred per payload byte (socket flows: TCP/IP framing)
        uint32_t src{0};     //!< sending GPU
        uint32_t dst{0};     //!< receiving GPU
        uint32_t hashKey{0}; //!< id hashed for the ECMP path
        uint64_t pathStartDone{0}; //!< bytes already transferred when it joined this path
        int32_t route{-1};         //!< index in m_sprayRoutes, -1: the one path in res
    };

    /** The link directions of a sprayed flow, stored once per (source, destination, plane). */
    struct SprayRoute
    {
        std::vector<uint32_t> res;  //!< link directions the flow uses
        std::vector<double> share;  //!< share of the flow's bytes on each
        std::vector<uint32_t> path; //!< one of its equal-cost paths (latency), link directions
    };

    /** \return the resources of a flow: its path, or its spray route's directions */
    const std::vector<uint32_t>&
    Resources(const Flow& f) const
    {
        return f.route < 0 ? f.res : m_sprayRoutes[f.route].res;
    }

    /** \return the share of each resource of Resources(f), or nullptr when every share is 1 */
    const double*
    Shares(const Flow& f) const
    {
        return f.route < 0 ? nullptr : m_sprayRoutes[f.route].share.data();
    }

    /** \return the fixed-point load a rate \p fx puts on a resource it uses with \p share */
    static int64_t
    Weighted(int64_t fx, double share)
    {
        return share == 1.0 ? fx : std::llround(static_cast<double>(fx) * share);
    }

    /** No resource (a flow without a bottleneck yet). */
    static constexpr uint32_t kNoResource = 0xFFFFFFFFu;

    /** Heap entry of the water-filling: fair share, resource, version. */
    struct FillEntry
    {
        double share;     //!< capacity left / unfrozen flows
        uint32_t res;     //!< resource
        uint64_t version; //!< stale when the resource's version moved on
    };

    /** Bring a flow's remaining bytes up to now. */
    void Advance(Flow& f, int64_t now);
    /** Make sure a recomputation is scheduled at the current instant. */
    void RequestRecompute();
    /** Recompute the max-min rates that the starts and finishes since the last call changed. */
    void Recompute();
    /**
     * \brief Seed the next recomputation with the flows a saturated resource limits.
     * \param r the resource
     * \param otherRate rate of a flow that just left it (0 if none)
     */
    void SeedBottlenecked(uint32_t r, double otherRate);
    /** Add the flow in \p slot to the set being re-filled (once per recomputation). */
    void AddToSet(uint32_t slot);
    /** Add every flow of resource \p r to the set being re-filled. */
    void ExpandResource(uint32_t r);
    /**
     * Set up the filling of m_compFlows: per resource of the set its flows, their shares and old
     * rates, the capacity the fixed flows leave, and the first heap entries.
     */
    void StartFill();
    /** Progressive filling of the flows m_compFlows against the capacity fixed flows leave. */
    void WaterFill();
    /** \return true if the flows of the set are limited where a fixed flow is faster (the set
     * grew); false if the filling is the max-min allocation. */
    bool GrowSetWhereNotMaxMin();
    /** Apply the new rates of the set: link loads, remaining bytes, end-of-transfer events. */
    void CommitRates();
    /** \return true if the resource's load is its capacity (within the tolerance). */
    bool IsSaturated(const Resource& res) const;
    /** \return true if the flow in slot \p a ends before the one in slot \p b */
    bool EndsBefore(uint32_t a, uint32_t b) const;
    /** Move the entry at heap index \p i up or down to its place. */
    void SiftDone(uint32_t i);
    /** Put a flow's end of transfer (doneAt) in the heap, or move it there. */
    void ScheduleDone(uint32_t slot);
    /** Take a flow out of the heap of transfer ends. */
    void UnscheduleDone(uint32_t slot);
    /** Make the one simulator event point at the earliest end of transfer. */
    void ArmWakeup();
    /** Event: end the transfers that are due now. */
    void Wakeup();
    /** The fluid transfer of the flow in \p slot is over. */
    void TransferDone(uint32_t slot);
    /**
     * The message in \p slot is over and its connection has another queued: it follows on the
     * same slot and path at the same rate (nothing else on the path sees a change).
     */
    void NextMessage(uint32_t slot, int64_t now);
    /**
     * Hold a flow that no route can carry while a link is down, for Reroute() to start.
     * \return true if the flow waits
     */
    bool WaitsForRoute(uint32_t flowId,
                       uint32_t srcGpu,
                       uint32_t dstGpu,
                       uint64_t bytes,
                       uint8_t priority,
                       int64_t connection);
    /**
     * \brief Open a slot for a flow and put it on its path.
     * \param hashKey id hashed for the ECMP path (the flow id, or the connection id)
     * \return the slot, or -1 when the flow is unroutable
     */
    int64_t Open(
        uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint64_t bytes, uint32_t hashKey);
    /**
     * \return the fixed latency a message of \p bytes adds after its transfer on the path of
     * \p f (propagation plus store-and-forward of the first packet; class documentation)
     */
    int64_t PathLatencyNs(const Flow& f, uint64_t bytes) const;
    /** \return wire bytes per payload byte of a socket flow, in the capacity units of m_res */
    double SocketScale() const;
    /**
     * \brief Turn the flow into a socket-transport flow (class documentation).
     * \param f the flow, just opened
     * \param connectionKey its NCCL connection
     */
    void MakeSocketFlow(Flow& f, uint64_t connectionKey);
    /** Put the flow in \p slot on the resources of \p path (from GPU \p srcGpu). */
    void AttachPath(uint32_t slot, const std::vector<uint32_t>& path, uint32_t srcGpu);
    /** Put the flow in \p slot on Resources() (its path's directions or its spray route). */
    void JoinResources(uint32_t slot);
    /**
     * \brief The spray route of a flow (attribute Spray), made once per (source, destination,
     * plane).
     * \return its index in m_sprayRoutes, -1 when the flow stays on one path (same host, Spray
     * false) or has no route
     */
    int32_t SprayRouteOf(uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint32_t hashKey);
    /** Take the flow in \p slot off its resources (bytes carried so far stay counted). */
    void DetachPath(uint32_t slot);
    /** Set both resources of a link to \p rateBps times its loss factor (0 when down). */
    void ApplyLinkCapacity(uint32_t link);
    /** Lazily set up the per-link fault state. */
    void InitLinkState();
    /** Deliver: report the flow as finished (after its latency). */
    void Deliver(uint32_t flowId);

    Ptr<TopologyDescription> m_topo;       //!< graph and routes
    uint32_t m_mtu;                        //!< bytes, store-and-forward unit
    uint32_t m_headerBytes;                //!< header bytes per Mtu of payload
    uint32_t m_seed;                       //!< ECMP hash seed
    bool m_ecmp;                           //!< spread flows over equal-cost paths
    bool m_spray{false};                   //!< split every flow over the equal-cost paths
    std::vector<SprayRoute> m_sprayRoutes; //!< spray routes, by index
    std::unordered_map<uint64_t, int32_t> m_sprayRouteOf; //!< (src, dst, plane) -> index
    Time m_sampleInterval;                                //!< link series period; 0 = no series
    int64_t m_nextSample{0};                              //!< ns, time of the next link sample
    std::vector<uint64_t> m_sampledBytes;  //!< carried bytes at each direction's last sample
    std::vector<uint32_t> m_sampleActive;  //!< directions with a flow or unsampled bytes, in order
    std::vector<uint32_t> m_sampleJoined;  //!< listed since the last sample, not yet merged
    std::vector<int64_t> m_seriesTime;     //!< link series: sample times that have rows, ns
    std::vector<uint64_t> m_seriesTimeEnd; //!< link series: rows up to that sample time
    SeriesColumn<uint32_t> m_seriesDir;    //!< link series: direction of each row
    SeriesColumn<uint64_t> m_seriesBytes;  //!< link series: carried payload bytes of each row
    uint32_t m_socketMss;                  //!< TCP payload per segment (socket flows)
    uint32_t m_socketOverhead;             //!< wire bytes per segment beyond payload
    uint32_t m_socketInitialCwnd;          //!< TCP initial window, segments
    std::unordered_set<uint64_t> m_socketConnections; //!< socket connections already opened

    std::vector<Resource> m_res;       //!< 2 per link
    std::vector<Flow> m_flows;         //!< slots
    std::vector<uint32_t> m_freeSlots; //!< unused slots
    std::vector<uint32_t> m_seedRes;   //!< saturated resources left by finished flows
    std::vector<uint32_t> m_seedFlows; //!< slots of flows started since the last recomputation
    bool m_recomputePending{false};    //!< a Recompute event is scheduled
    bool m_forceWhole{false};          //!< the next recomputation fills whole components
    std::vector<uint8_t> m_linkUp;     //!< per link: 1 up (faults; empty = all up)
    std::vector<double> m_linkRate;    //!< per link: current rate, bit/s
    std::vector<double> m_linkGoodput; //!< per link: capacity factor of a lossy link
    uint64_t m_rerouted{0};            //!< flows moved by link faults
    bool m_localRecompute{true};       //!< re-fill only the affected flows (see class doc)
    uint32_t m_maxRounds{16};          //!< growths before a local recomputation goes whole
    uint64_t m_stamp{0};               //!< visit stamp counter

    std::vector<uint32_t> m_compFlows;   //!< scratch: flows being re-filled
    std::vector<uint32_t> m_compRes;     //!< scratch: resources of those flows
    std::vector<uint32_t> m_bottlenecks; //!< scratch: resources that froze flows
    std::vector<double> m_capLeft;       //!< scratch: capacity left per resource
    std::vector<uint32_t> m_cntLeft;     //!< scratch: unfrozen flows per resource
    std::vector<double> m_wLeft;         //!< scratch: shares of the unfrozen flows per resource
    std::vector<uint32_t> m_cntSet;      //!< scratch: flows of the set per resource
    std::vector<int64_t> m_setFx;        //!< scratch: fixed-point rates of the set per resource
    std::vector<double> m_share;         //!< scratch: rate of the flows a resource froze
    std::vector<double> m_maxOld;        //!< scratch: fastest old rate of the set per resource
    std::vector<double> m_maxNew;        //!< scratch: fastest new rate of the set per resource
    std::vector<int64_t> m_newSetFx;     //!< scratch: new fixed-point rates of the set
    std::vector<uint64_t> m_version;     //!< scratch: heap entry version per resource
    uint64_t m_popVersion{0};            //!< scratch: version of the entries pushed this pop
    std::vector<uint32_t> m_touched;     //!< scratch: resources whose share changed this pop
    std::vector<FillEntry> m_heap;       //!< scratch: water-filling heap

    std::vector<uint32_t> m_doneHeap; //!< slots of flows by end of transfer (binary min-heap)
    uint64_t m_doneSeq{0};            //!< sequence for ties in m_doneHeap
    EventId m_wakeup;                 //!< the simulator event of the earliest end of transfer
    int64_t m_wakeupAt{-1};           //!< ns of m_wakeup, -1 when none

    uint64_t m_started{0};        //!< flows started
    uint64_t m_finished{0};       //!< flows delivered
    uint64_t m_active{0};         //!< flows transferring
    uint64_t m_unroutable{0};     //!< flows without a path
    std::string m_unroutableMsg;  //!< first unroutable flow
    uint64_t m_bytesDelivered{0}; //!< payload delivered
    uint64_t m_recomputations{0}; //!< recomputations
    uint64_t m_assignments{0};    //!< flow rate assignments
    uint64_t m_growths{0};        //!< local recomputations that had to grow their set

    /** A flow started while a link fault left no route between its GPUs. */
    struct UnroutedFlow
    {
        uint32_t flowId;    //!< flow id
        uint32_t srcGpu;    //!< sending GPU
        uint32_t dstGpu;    //!< receiving GPU
        uint64_t bytes;     //!< bytes
        uint8_t priority;   //!< priority class
        int64_t connection; //!< connection (-1: none)
    };

    std::vector<UnroutedFlow> m_unrouted; //!< flows waiting for a route, in start order

    /** Messages of one connection waiting behind the one in transfer. */
    struct Connection
    {
        uint32_t slot{0};                                 //!< slot carrying the connection
        std::deque<std::pair<uint32_t, uint64_t>> queued; //!< (flow id, bytes), in post order
    };

    std::unordered_map<uint32_t, Connection> m_connections; //!< open connections by id
    uint64_t m_messagesQueued{0}; //!< messages that waited behind another on their connection

    TracedCallback<uint32_t, uint32_t, uint32_t, uint64_t> m_startTrace; //!< id, src, dst, bytes
    TracedCallback<uint32_t> m_transferDoneTrace;                        //!< id
    TracedCallback<uint32_t, double> m_rateTrace;                        //!< id, bit/s
};

} // namespace ns3

#endif /* HETEROSIM_FLUID_NETWORK_H */
