/*
 * HeteroSim: bulk export of a packet network's counters, port table and sampled series.
 */
#ifndef HETEROSIM_PACKET_NETWORK_STATS_H
#define HETEROSIM_PACKET_NETWORK_STATS_H

#include "ns3/packet-network.h"
#include "ns3/ptr.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Copies a PacketNetwork's statistics into caller-owned arrays, one call per table: the
 * network totals, the per-port table, per-flow counters, the queue-pair ids, the sampled queue
 * and rate series (PacketNetworkSampler) and the fast-forward counters. Made for bulk readers
 * (HeteroSim's Python side fills numpy arrays with it); it reads the network and changes
 * nothing, so it may be created at any time, also mid-run.
 */
class PacketNetworkStats
{
  public:
    /** Number of values of CopyCounters. */
    static constexpr uint32_t N_COUNTERS = 9;

    /** \param network the network read (built) */
    explicit PacketNetworkStats(Ptr<PacketNetwork> network);

    /**
     * \brief Copy per-port counters (arrays of PacketNetwork::GetNPorts() entries). Ports on
     * host links add the bytes of the intra-host fluid model (HostFlows=fluid).
     * \param node transmitting node
     * \param link topology link
     * \param direction 0 = a->b, 1 = b->a
     * \param bytesSent wire bytes sent
     * \param maxQueue max data queue bytes
     * \param meanQueue time-weighted mean data queue bytes
     * \param pauseSent PFC XOFF frames sent
     * \param pauseReceived PFC XOFF frames received
     * \param pausedNs time paused by the peer, ns
     * \param ecnMarks ECN marks applied at this egress
     * \param drops drops of frames bound for this port
     * \param framesSent frames sent (packet-hops)
     * \param trims data frames bound for this port that the switch trimmed to their header
     * (RdmaSwitch::Trimming; 0 elsewhere)
     */
    void CopyPortStats(int32_t* node,
                       int32_t* link,
                       uint8_t* direction,
                       uint64_t* bytesSent,
                       uint64_t* maxQueue,
                       double* meanQueue,
                       uint64_t* pauseSent,
                       uint64_t* pauseReceived,
                       int64_t* pausedNs,
                       uint64_t* ecnMarks,
                       uint64_t* drops,
                       uint64_t* framesSent,
                       uint64_t* trims) const;

    /**
     * \brief Copy per-flow statistics for the given flow ids (zeros for unknown ids). A queue
     * pair's counters are reported on its first flow only, so that sums over flows count each
     * event once; bytes are the flow's own message's.
     * \param n number of ids
     * \param ids flow ids
     * \param retransmits data packets sent again
     * \param cnps CNPs received by the sender
     * \param rateChanges congestion-control rate changes
     * \param timeouts retransmission timeouts
     * \param bytesAcked bytes acknowledged
     * \param bytesDelivered bytes delivered in order at the receiver
     */
    void CopyFlowStats(uint32_t n,
                       const uint32_t* ids,
                       uint64_t* retransmits,
                       uint64_t* cnps,
                       uint64_t* rateChanges,
                       uint64_t* timeouts,
                       uint64_t* bytesAcked,
                       uint64_t* bytesDelivered) const;

    /**
     * \brief Copy per-flow reordering seen by the receivers (RdmaNic: data packets that arrived
     * ahead of the expected byte, and the largest such lead in MTU packets), reported on a
     * queue pair's first flow only as in CopyFlowStats; zeros for unknown ids and TCP flows.
     * \param n number of ids
     * \param ids flow ids
     * \param outOfOrder out-of-order data packets
     * \param maxDepth largest reorder depth, packets
     */
    void CopyReorderStats(uint32_t n,
                          const uint32_t* ids,
                          uint64_t* outOfOrder,
                          uint64_t* maxDepth) const;

    /**
     * \brief Copy network totals: flows, bytes, drops, retransmits, PFC pause frames, ECN
     * marks, CNPs, frames sent (packet-hops), timeouts.
     * \param out N_COUNTERS values
     */
    void CopyCounters(uint64_t* out) const;

    /**
     * \brief Copy the data packets each switch trimmed to their header (RdmaSwitch Trimming).
     * \param trims one entry per topology node (TopologyDescription::GetNNodes()): the switch's
     * trims, 0 for endpoints and switches that never trimmed
     * \return whether any switch trims (Trimming on and its buffer lossy)
     */
    bool CopySwitchTrims(uint64_t* trims) const;

    /** \brief Copy the flow ids of all queue pairs, in start order. \param out ids
     * (PacketNetwork::GetNQueuePairs() entries) */
    void CopyQueuePairIds(uint32_t* out) const;

    /** \return number of queue samples */
    uint64_t GetNQueueSamples() const;
    /**
     * \brief Copy the queue series.
     * \param timeNs sample time
     * \param port port index
     * \param bytes data queue bytes
     * \param txBytes cumulative wire bytes sent by the port
     */
    void CopyQueueSeries(int64_t* timeNs, uint32_t* port, uint64_t* bytes, uint64_t* txBytes) const;
    /** \return number of rate samples */
    uint64_t GetNRateSamples() const;
    /**
     * \brief Copy the per-queue-pair rate series (socket-transport messages too: their rate is
     * the goodput since the previous sample, see SocketTransport::AppendProgress).
     * \param timeNs sample time
     * \param flow flow id
     * \param rateBps congestion-control rate
     * \param bytesAcked bytes acknowledged so far
     */
    void CopyRateSeries(int64_t* timeNs,
                        uint32_t* flow,
                        double* rateBps,
                        uint64_t* bytesAcked) const;

    /**
     * \brief Copy the steady-state fast-forward statistics (PacketFastForward::CopyStats;
     * zeros when Acceleration is exact).
     * \param out PacketFastForward::N_STATS values
     */
    void CopyFastForwardStats(uint64_t* out) const;
    /**
     * \brief Copy the episode memoization statistics (PacketEpisodeCache::CopyStats; zeros
     * without memo).
     * \param out PacketEpisodeCache::N_STATS values
     */
    void CopyMemoStats(uint64_t* out) const;

  private:
    Ptr<PacketNetwork> m_net; //!< the network read
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_NETWORK_STATS_H */
