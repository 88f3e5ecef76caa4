/*
 * HeteroSim: memoization of repeated contention episodes of the packet network.
 */
#ifndef HETEROSIM_PACKET_EPISODE_CACHE_H
#define HETEROSIM_PACKET_EPISODE_CACHE_H

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{

class PacketNetwork;

/**
 * \brief Reuses the outcome of a contention episode that repeats an earlier one.
 *
 * Episode: the queue pairs created at one simulated instant whose links touch (a connected
 * component of the graph "two queue pairs share a link"; a queue pair's links are those of its
 * data path and of its ACK path, both directions of each, as the switches forward them), when
 * the episode starts from an idle state: no other unfinished queue pair and no replay on any of
 * those links, every port of them with empty queues and not paused, each queue pair new (fresh
 * congestion-control state, one message), no fault so far. An episode ends when every one of
 * its queue pairs has been delivered and has all its bytes acknowledged.
 *
 * Key: canonical and placement-independent. Links get ids in order of first use, walking the
 * queue pairs in creation order, data path then ACK path, each traversed link with its
 * direction relative to its first use; per queue pair the key holds size, priority, the host
 * latencies before the NIC and after delivery, the line and port rates and the two link
 * sequences; per canonical link its rate, delay and kind. Run-wide settings (congestion control
 * and its attributes, MTU, buffers, ECN, PFC) are fixed for a run and the cache lives in one run,
 * so they are part of every key implicitly. Episodes that are the same up to a relabelling of
 * hosts, rails and switches (the same collective on another communicator, the next bucket of the
 * same size) have the same key.
 *
 * Miss: the episode runs packet by packet and is recorded: per queue pair the offsets (from
 * the episode's start) of delivery and of the last acknowledgement, its retransmissions,
 * timeouts, NACKs and CNPs; per port of its links the wire bytes, frames, PFC pauses sent and
 * received, paused time, ECN marks, drops, queue-occupancy integral and queue maximum; and
 * every TrajectoryInterval a sample of each queue pair's bytes delivered in order, its
 * congestion-control rate and CNPs, and each port's counters (at most MaxSamples: a longer
 * episode keeps every other sample and samples half as often). A recording that another queue
 * pair joins (on any of its links), that gets a message appended, or that a fault
 * interrupts is discarded.
 *
 * Recordings per key: an episode without ECN marks, CNPs, PFC pauses or drops is a
 * deterministic function of its inputs and is recorded once. One with them is not: RED marks
 * at random, so every occurrence is one draw of its outcome (in the exact run, too, the same
 * incast repeated gives different completion times and marks). Such a key is recorded
 * CongestedRecordings times, from its first occurrences, and the replays cycle through those
 * recordings: the replayed occurrences reproduce the recorded draws, not the draw the exact run
 * would have made for that occurrence, and agree with the exact run in distribution only. And
 * a congested episode is not independent of the traffic beside it: the switches' shared buffers
 * set the PFC thresholds of every port, so an episode replayed instead of simulated leaves
 * buffer free for the episodes running beside it and changes their pauses and marks. By default
 * (ReplayCongested false) a congested key is therefore recorded once and its occurrences run
 * packet by packet.
 *
 * Hit: the queue pairs are not started on their NICs; their deliveries and last
 * acknowledgements are scheduled at the recorded offsets (the flows complete through the
 * network's usual path, host latency included), and at the episode's end each port of its
 * links adds the recorded counters and each queue pair its recorded counters.
 *
 * Interrupted replay: when, before a replay ends, a queue pair is created on one of its links,
 * a message is appended to one of its queue pairs, or a fault fires, the replay is
 * materialised at that time from the last trajectory sample at or before it: each queue pair
 * not yet delivered keeps the bytes the sample had delivered in order (whole packets; its byte
 * stream shortened by that much, as fast-forward does) and restarts at once with the sampled
 * congestion-control rate, and the ports add the sampled counters; from there the episode runs
 * packet by packet. Approximations of a materialised replay: the queues and frames in flight at
 * that time are not restored (they start empty; frames in flight at the sample are counted on
 * the ports that carried them and sent again), progress between the sample and the
 * interruption is simulated again (at most one TrajectoryInterval), DCQCN's target rate, alpha
 * and stages start afresh at the sampled rate.
 *
 * Approximations of a hit: ECN marking is random, so a replay carries the recorded episode's
 * draw; the shared buffer of a switch that an episode crosses is assumed not to couple it with
 * traffic on other links of that switch (it only matters when the buffer is near full); the
 * round-robin position of a NIC port at the start is not part of the key; the sampled queue and
 * rate series have no samples of replayed queue pairs; congestion-control rate changes are not
 * counted for replayed queue pairs.
 */
class PacketEpisodeCache : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    PacketEpisodeCache();
    ~PacketEpisodeCache() override;

    /**
     * \brief Work on \p net.
     * \param net the network (must outlive this object's use)
     */
    void Attach(PacketNetwork* net);

    /**
     * \brief A queue pair was created; its start on the NIC is already scheduled.
     * \param slot queue-pair slot
     * \param start the scheduled RdmaNic::StartQueuePair event (cancelled on a hit)
     */
    void QueuePairCreated(uint32_t slot, EventId start);
    /**
     * \brief A message is about to be appended to the open queue pair \p slot.
     * \param slot queue-pair slot
     */
    void MessageAppended(uint32_t slot);
    /**
     * \brief The receiver got every byte of a message of queue pair \p slot.
     * \param slot queue-pair slot
     */
    void Delivered(uint32_t slot);
    /** \brief A fault changed the fabric: replays are materialised, no episode from now on. */
    void Fault();
    /**
     * \brief Steady-state fast-forward (PacketFastForward): move the trajectory sampling of
     * the recordings \p deltaNs later (replays are not the fast-forward's: they bound its skips).
     * \param deltaNs shift, ns
     * \param moved receives the events to shift in the event queue
     */
    void ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved);

    /** Number of values of CopyStats. */
    static constexpr uint32_t N_STATS = 14;
    /**
     * \brief Statistics: lookups (episodes that started idle), hits, episodes recorded,
     * recordings discarded (joined, appended, fault), starts not idle (busy links or queues),
     * starts not eligible (after a fault, a queue pair starting at once, a message appended
     * before the start), replays materialised (interrupted), queue pairs replayed, payload
     * bytes replayed, frames (packet-hops) not simulated, entries stored, entries refused
     * (MaxEntries reached), trajectory samples held by the stored recordings (each recording
     * holds at most MaxSamples), congested episodes run packet by packet (ReplayCongested false).
     * \param out N_STATS values
     */
    void CopyStats(uint64_t* out) const;

  protected:
    void DoDispose() override;

  private:
    /** Per-port counters recorded and replayed. */
    struct PortCounters
    {
        uint64_t tx{0};            //!< wire bytes
        uint64_t frames{0};        //!< frames
        uint64_t pauseSent{0};     //!< XOFF sent
        uint64_t pauseReceived{0}; //!< XOFF received
        int64_t pausedNs{0};       //!< paused time
        uint64_t marks{0};         //!< ECN marks
        uint64_t drops{0};         //!< drops
        double area{0};            //!< queue occupancy integral, byte-ns
        uint64_t maxQueue{0};      //!< queue maximum reached in the episode (0: not above before)
    };

    /** What is stored for a key. */
    struct Entry
    {
        std::vector<int64_t> deliverNs;        //!< per queue pair: offset of delivery
        std::vector<int64_t> doneNs;           //!< per queue pair: offset of the last ACK
        std::vector<uint64_t> qpCounters;      //!< per queue pair: retx, timeouts, NACKs, CNPs
        std::vector<PortCounters> ports;       //!< per canonical port: at the end
        int64_t endNs{0};                      //!< episode length
        std::vector<int64_t> sampleNs;         //!< trajectory sample offsets (first is 0)
        std::vector<uint64_t> sampleDelivered; //!< [sample][queue pair] bytes in order
        std::vector<double> sampleRate;        //!< [sample][queue pair] CC rate, bit/s
        std::vector<uint64_t> sampleCnps;      //!< [sample][queue pair] CNPs
        std::vector<PortCounters> samplePorts; //!< [sample][port] counters
        uint64_t frames{0};                    //!< frames over the episode's ports
        uint64_t hits{0};                      //!< times replayed
        bool congested{false}; //!< marks, CNPs, pauses or drops (a random draw of RED)
    };

    /** The recordings of one key, replayed in turn. */
    struct Recordings
    {
        std::vector<std::shared_ptr<Entry>> recordings; //!< in the order recorded
        uint64_t next{0};                               //!< the next one to replay
    };

    enum class State
    {
        PENDING,   //!< created this instant, not yet sealed
        EXACT,     //!< packet by packet, not recorded
        RECORDING, //!< packet by packet, recorded
        REPLAYING, //!< replayed from an entry
        DONE       //!< finished (links free)
    };

    /** An episode (or a set of queue pairs run exactly). */
    struct Group
    {
        State state{State::PENDING};
        int64_t t0{0};                     //!< creation time
        std::vector<uint32_t> slots;       //!< queue pairs, creation order
        std::vector<EventId> starts;       //!< their scheduled starts
        std::vector<uint32_t> links;       //!< links touched (unique)
        std::vector<uint32_t> ports;       //!< canonical port order
        std::string key;                   //!< canonical key
        bool eligible{true};               //!< may be looked up
        std::vector<PortCounters> base;    //!< recording: port counters at t0
        int64_t sampleStrideNs{0};         //!< recording: time between kept samples
        std::vector<int64_t> deliverNs;    //!< recording: offsets of delivery (-1 not yet)
        std::shared_ptr<Entry> rec;        //!< recording: the entry being filled
        std::shared_ptr<const Entry> play; //!< replaying: the entry
        std::vector<EventId> events;       //!< replaying: pending events
        std::vector<bool> delivered;       //!< replaying: per queue pair delivered
        bool counted{false};               //!< replaying: port counters added
        std::vector<bool> qpCounted;       //!< replaying: per queue pair acknowledged in full
    };

    /** Where a materialised replay stands in its recording: between samples \p k and the
     * next (or the episode's end if \p last), \p f of the way. */
    struct ReplayPoint
    {
        std::size_t k{0}; //!< the sample at or before the offset
        bool last{false}; //!< k is the last sample: interpolate towards the end
        double f{0};      //!< fraction of the way to the next sample, in [0, 1]
    };

    /** Seal the queue pairs created this instant into episodes. */
    void Seal();
    /** \return the queue pairs of \p pending grouped into components that share links
     * (indices into \p pending, in order of first member) */
    std::vector<std::vector<std::size_t>> SharedLinkComponents(
        const std::vector<uint32_t>& pending);
    /** Open the group of the queue pairs \p comp (indices into the sealed \p pending,
     * \p starts and \p appended) at \p now and describe it; clears \p eligible unless each
     * is the single message of an untouched queue pair whose start is still due. \return its id */
    uint32_t OpenGroup(const std::vector<std::size_t>& comp,
                       const std::vector<uint32_t>& pending,
                       const std::vector<EventId>& starts,
                       const std::vector<bool>& appended,
                       int64_t now,
                       bool& eligible);
    /** Take the links of group \p id (conflicting groups are materialised or discarded).
     * \return whether they were idle: no live group, no queued bytes, no pause */
    bool TakeLinks(uint32_t id);
    /** Look group \p id up: replay a hit, else record it (or run it exactly if refused or
     * congested). */
    void LookUp(uint32_t id, int64_t now);
    /** Start recording group \p id: base counters, first sample, sampling timer. */
    void StartRecording(uint32_t id);
    /** \brief Run the group's queue pairs packet by packet (no lookup, no recording). */
    void RunInPackets(Group& h);
    /** \brief Hand the group's queue pairs to the fast-forward, if there is one. */
    void HandToFastForward(const Group& h);
    /** Links and canonical key of queue pair \p slot appended to \p g. */
    void Describe(Group& g);
    /** \return whether group \p id holds its links (drops finished ones lazily). */
    bool Live(uint32_t id);
    /** Finish the recording of \p id if all its queue pairs are done; \return true if so. */
    bool TryFinishRecording(uint32_t id);
    /** Discard the recording of \p id (it goes on packet by packet). */
    void Discard(uint32_t id);
    /** Start the replay of \p id from \p e. */
    void StartReplay(uint32_t id, std::shared_ptr<const Entry> e);
    /** Replay: queue pair \p i of \p id delivered. */
    void ReplayDeliver(uint32_t id, uint32_t i);
    /** Replay: queue pair \p i of \p id acknowledged in full. */
    void ReplayDone(uint32_t id, uint32_t i);
    /** Replay: the end of \p id. */
    void ReplayEnd(uint32_t id);
    /** Materialise the replay of \p id now and continue packet by packet. */
    void Materialise(uint32_t id);
    /** \return where offset \p off falls among the samples of \p e */
    static ReplayPoint PointAt(const Entry& e, int64_t off);
    /** Materialise queue pair \p i of replaying group \p g at \p at: its bytes, CNPs and rate
     * so far, then restart it packet by packet (or finish it if delivered). */
    void MaterialiseQueuePair(Group& g, std::size_t i, const ReplayPoint& at, int64_t now);
    /** Add to the ports of replaying group \p g the counters of its recording up to \p at. */
    void AddPortsUpTo(const Group& g, const ReplayPoint& at);
    /** Take a trajectory sample of every recording; reschedules itself while any. */
    void SampleRecordings();
    /** Append one trajectory sample of \p id to its entry. */
    void SampleGroup(Group& g);
    /** \return the counters of port \p port now */
    PortCounters Read(uint32_t port) const;
    /** Add counters \p c to port \p port. */
    void AddToPort(uint32_t port, const PortCounters& c);
    /** Make \p id no longer own its links. */
    void Release(uint32_t id);
    /** Conflict handling before \p links are taken: \return whether they are idle. */
    bool Claim(const std::vector<uint32_t>& links, uint32_t self);

    // attributes
    Time m_sampleInterval;          //!< trajectory sampling period
    uint32_t m_maxEntries;          //!< most keys stored
    uint32_t m_congestedRecordings; //!< recordings kept of a congested episode
    bool m_replayCongested;         //!< replay congested episodes (else always exact)
    uint32_t m_maxSamples;          //!< trajectory samples kept per recording

    PacketNetwork* m_net{nullptr};
    bool m_faulted{false};                                 //!< a fault fired
    std::vector<Group> m_groups;                           //!< every group so far
    std::vector<int64_t> m_groupOf;                        //!< per slot: its group (-1 none)
    std::vector<std::vector<uint32_t>> m_linkOwners;       //!< per link: live groups on it
    std::vector<uint32_t> m_pending;                       //!< slots created this instant
    std::vector<EventId> m_pendingStarts;                  //!< their start events
    std::vector<bool> m_pendingAppended;                   //!< message appended before sealing
    EventId m_sealEvent;                                   //!< pending Seal
    EventId m_sampleEvent;                                 //!< pending SampleRecordings
    std::vector<uint32_t> m_recording;                     //!< groups recording
    std::unordered_map<std::string, Recordings> m_entries; //!< key -> outcomes
    uint64_t m_stats[N_STATS]{};                           //!< see CopyStats

    TracedCallback<int64_t, uint32_t, bool> m_lookupTrace; //!< time ns, queue pairs, hit
    TracedCallback<int64_t, uint32_t> m_interruptTrace;    //!< time ns, queue pairs
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_EPISODE_CACHE_H */
