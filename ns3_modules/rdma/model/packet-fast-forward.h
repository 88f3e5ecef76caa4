/*
 * HeteroSim: steady-state fast-forward of the packet network.
 */
#ifndef HETEROSIM_PACKET_FAST_FORWARD_H
#define HETEROSIM_PACKET_FAST_FORWARD_H

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

namespace ns3
{

class EventImpl;
class PacketNetwork;
class RdmaQueuePair;

/**
 * \brief Skips settled stretches of a packet run: while the queue pairs on the fabric and
 * their rates have not changed, advances them analytically to the next event that can change
 * them, then lets the packet simulation resume.
 *
 * Detection: every CheckInterval the controller takes a snapshot of each unfinished queue pair
 * (bytes acknowledged; retransmissions, timeouts, NACKs and CNPs received) and of each port
 * (wire bytes and frames sent, queued bytes, ECN marks, PFC pause frames sent, drops). A
 * window is settled when no queue pair started or finished in it and none went idle between
 * messages (a message queued on a queue pair that had run out of posted bytes, or a queue pair's
 * last queued message delivered; a message queued behind bytes still being sent, or delivered
 * while the next one is being sent, changes no rate: chunks of a collective on one connection),
 * every queue pair has started, has posted bytes left to send and made progress, no queue pair's
 * acknowledged bytes differ from the previous window's by more than RateTolerance of them plus two
 * packets (the quantisation of one window), no queue pair is paced by its congestion control (its
 * rate is at its line rate, or above its measured throughput by more than RateMargin: a DCQCN rate
 * recovering below that sets the throughput and is not settled however slowly it moves), no port's
 * queue moved by more than QueueTolerance bytes (or RateTolerance of the queue), and nothing was
 * marked, paused, dropped, retransmitted or NACKed and no CNP arrived anywhere. After StableWindows
 * settled windows in a row the rates are taken as the mean over those windows (bytes acknowledged
 * between the last ACK before the first and the last snapshot, over the time between those
 * ACKs); queue pairs that leave
 * one endpoint port with the same rate (within the tolerance) get equal shares of their total
 * (the port serves them round robin, a packet each), which their sum measures more precisely.
 *
 * Skip: the interval is the smaller of (a) the time until the first queue pair would reach
 * the end of the message it is sending at its settled rate, less MessageGuard where another
 * message may follow (one is queued, or the queue pair carries a connection's messages: a
 * collective's chunks) or Guard (a flow's last message), and (b) the
 * time of the earliest
 * pending event that is not the fabric's own (a compute task, a flow start, a delivery at a
 * host, a flow of the intra-host fluid model, a fault, the run's stop time); if it is shorter
 * than MinJump nothing is skipped. A skip that stopped at another event is followed by a
 * check right after it: if that event started, finished or posted nothing on the fabric,
 * the skip goes on with the same settled rates (chained skip, any length). A skip that stopped
 * before a message boundary is followed in packets until the boundary was delivered (what is left
 * of the message, in flight included, at the settled rate) and every queue pair sends again (one
 * that went idle between messages, or finished and had its connection's next message open a new
 * queue pair, which takes over its rate; in a ring's lock-step every queue pair of the fabric
 * may finish at a step and the next ones open microseconds later), waiting at most BoundaryWait,
 * then the skip goes on the same way if nothing else
 * changed and no mark, pause, drop, CNP or retransmission came in between; the
 * boundary's delivery, and so everything that waits for it, happens at its packet-level time.
 * Over the interval each
 * queue pair delivers its settled rate times the interval, rounded down to whole packets (its byte
 * stream is shortened by that much out of the message being sent, and every later message's offsets
 * move up by as much, so the frames in flight and every sequence number stay valid),
 * and each port counts wire bytes and frames at its settled rate. Everything the fabric has
 * scheduled (frames on the wire and their serialisation ends, pacing wake-ups, retransmission and
 * congestion-control timers, the sampling event) moves later by the interval (a
 * ShiftableScheduler, installed as the simulator's event queue by Attach), so queues, frames
 * in flight and PFC state come out of the skip as they went in. Congestion control then
 * applies what the interval did to it without CNPs (RdmaCongestionControl::AdvanceSkipped:
 * DCQCN's increase-timer expirations and byte-counter stages, in that order; its alpha ages
 * with the clock). Queue occupancy integrals count the settled queue over the interval, and
 * each endpoint counts the ACKs of the interval at its settled rate.
 *
 * Congested equilibrium (CongestedWindows > 0; off by default): where ECN marks, CNPs or PFC pauses
 * keep the window-to-window checks above from settling, the controller also compares two blocks of
 * CongestedWindows windows each (a sliding history of snapshots). The blocks agree when the set
 * and messages did not change, nothing was dropped, retransmitted or NACKed, every queue pair
 * acknowledged the same bytes in both within CongestedRateTolerance (plus two packets), every
 * queue pair's CNPs and every port's ECN marks and PFC pause frames are the same in both within
 * SignalTolerance (plus two standard deviations of a Poisson count), every port's mean queue
 * (over the snapshots of a block) is the same within QueueBand bytes (or CongestedRateTolerance),
 * and every queue pair without CNPs is clear of its own rate controller (as above). The skip
 * then advances every queue pair at its mean rate over both blocks and counts marks, pauses,
 * CNPs (at the queue pair and the NIC that sent them), wire bytes, frames and ACKs at their
 * measured rates; queue pairs that received CNPs keep their controller's state as it was (its
 * alpha clock moves with the interval: RdmaCongestionControl::HoldSkipped), since the cuts and
 * recoveries of an equilibrium cancel over it. Approximation: the equilibrium's oscillation is
 * replaced by its mean, and the phase of the packets when the skip ends is the phase when it
 * began; where a result depends on that phase (an incast's convergence: see
 * benchmarks/README.md) the fast run agrees with the exact one only as well as two exact runs
 * with the starts moved by a few ns agree with each other.
 *
 * Where it cannot be trusted it does nothing and the run stays packet by packet: while any
 * of the conditions above fails (congestion: ECN marks, PFC, CNPs; losses; a fault just
 * fired; rates still moving), and for congestion control that reads time stamps carried in
 * frames (TIMELY, HPCC) or grows a window without marks (DCTCP), and where TCP socket hosts
 * share the fabric (SocketTransport state and timers are not advanced), which it never skips.
 * Approximation: the skipped interval is what
 * the settled rates give; the per-packet jitter a packet run would show over it (round-robin
 * phase, rate oscillation within the tolerance) is not simulated, and the sampled
 * queue and rate series have no samples inside skipped intervals.
 */
class PacketFastForward : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    PacketFastForward();
    ~PacketFastForward() override;

    /**
     * \brief Work on \p net: installs the ShiftableScheduler as the simulator's event queue.
     * \param net the network (must outlive this object's use)
     * \param supported false if the network is never skipped (congestion control, TCP hosts)
     * nothing is ever skipped and the fallback is counted)
     */
    void Attach(PacketNetwork* net, bool supported);

    /** \brief A queue pair was created (slot). \param slot queue-pair slot */
    void QueuePairAdded(uint32_t slot);
    /** \brief The set of messages changed (posted or delivered). */
    void Changed();
    /**
     * \brief A message was queued on an open queue pair.
     * \param slot queue-pair slot
     * \param busy the queue pair was still sending (the message queues behind the others)
     */
    void MessageQueued(uint32_t slot, bool busy);
    /**
     * \brief A message of a queue pair was delivered.
     * \param slot queue-pair slot
     * \param more another message of the queue pair follows and is being sent
     */
    void MessageDelivered(uint32_t slot, bool more);
    /** \brief A fault changed the fabric. */
    void Fault();

    /** Number of values of CopyStats. */
    static constexpr uint32_t N_STATS = 11;
    /**
     * \brief Statistics: episodes, skipped ns, skipped payload bytes, checks, checks not
     * settled (changing), checks with congestion or losses, checks where the next change was
     * closer than MinJump, checks right after a fault, 1 if the network is never skipped
     * (its congestion control, or TCP socket hosts on the fabric), episodes that skipped a
     * congested equilibrium, and the ns they skipped.
     * \param out N_STATS values
     */
    void CopyStats(uint64_t* out) const;

  protected:
    void DoDispose() override;

  private:
    /** What the notifications since the previous check reported. */
    struct Events
    {
        bool changed; //!< the set of queue pairs or messages changed
        bool hard;    //!< a change other than a gap between messages
        bool fault;   //!< a fault
    };

    /**
     * One check's readings: per live queue pair (indexed like m_live), per port, per node.
     */
    struct Reading
    {
        std::vector<uint64_t> una;    //!< per queue pair: bytes acknowledged
        std::vector<int64_t> prog;    //!< per queue pair: time of its last ACK progress
        std::vector<uint64_t> snd;    //!< per queue pair: next byte to send
        std::vector<int64_t> sent;    //!< per queue pair: start of its last send
        std::vector<uint64_t> sig;    //!< per queue pair: loss/CNP signature
        std::vector<uint64_t> cnps;   //!< per queue pair: CNPs received
        std::vector<uint64_t> loss;   //!< per queue pair: retransmits, timeouts, NACKs
        std::vector<uint64_t> win;    //!< per queue pair: bytes acknowledged in the window
        std::vector<uint64_t> tx;     //!< per port: wire bytes
        std::vector<uint64_t> frames; //!< per port: frames
        std::vector<uint64_t> queue;  //!< per port: queued bytes
        std::vector<uint64_t> psig;   //!< per port: marks + pauses + drops
        std::vector<uint64_t> marks;  //!< per port: ECN marks
        std::vector<uint64_t> pauses; //!< per port: PFC pause frames sent
        std::vector<uint64_t> drops;  //!< per port: drops
        std::vector<uint64_t> acks;   //!< per node: ACKs sent
        std::vector<uint64_t> cnpOut; //!< per node: CNPs sent
        bool structural{false};       //!< a queue pair that cannot be skipped now
        bool losses{false};           //!< a loss since the previous snapshot
    };

    /** One snapshot of the congested check's history (indexed like m_live and the ports). */
    struct Snapshot
    {
        int64_t ns{0};                //!< time
        std::vector<uint64_t> una;    //!< per queue pair: bytes acknowledged
        std::vector<int64_t> prog;    //!< per queue pair: time of its last ACK progress
        std::vector<uint64_t> cnps;   //!< per queue pair: CNPs received
        std::vector<uint64_t> tx;     //!< per port: wire bytes
        std::vector<uint64_t> frames; //!< per port: frames
        std::vector<uint64_t> queue;  //!< per port: queued bytes
        std::vector<uint64_t> marks;  //!< per port: ECN marks
        std::vector<uint64_t> pauses; //!< per port: PFC pause frames sent
        std::vector<uint64_t> acks;   //!< per node: ACKs sent
        std::vector<uint64_t> cnpOut; //!< per node: CNPs sent
    };

    /** A skip as TryJump plans it. */
    struct Jump
    {
        std::vector<double> reach; //!< per live queue pair: ns to its message end, less the guard
        double horizon{std::numeric_limits<double>::infinity()}; //!< the smallest reach
        bool boundary{false};       //!< the horizon's message may be followed by another
        double limit{0.0};          //!< horizon bounded by the next other event (and span)
        bool stoppedByOther{false}; //!< the next other event bounds the skip
        int64_t delta{0};           //!< the skip, ns
    };

    /**
     * Periodic check: drop finished queue pairs, go on with a chained skip, read the network,
     * judge the window since the previous check, skip when settled.
     */
    void Check();
    /** \return the notification flags since the previous check (and clear them) */
    Events TakeEvents();
    /** Set again the notification flags of \p events (a check put off). */
    void PutBackEvents(const Events& events);
    /** \return whether a live queue pair finished (it is dropped from m_live) */
    bool DropFinished();
    /** Forget the windows and the congested history (the next check starts afresh). */
    void ForgetWindows();
    /** \return the checks in packets at a boundary before a chain ends (BoundaryWait / 500 ns) */
    uint32_t BoundaryRetries() const;
    /**
     * Every queue pair finished at a boundary: wait in packets for the next ones.
     * \param events the notifications since the previous check
     * \return whether the next check is scheduled (nothing else to do now)
     */
    bool WaitForNextQueuePairs(const Events& events);
    /**
     * Go on after a chained skip: skip on with the same rates if nothing changed here.
     * \param now current time, ns
     * \param events the notifications since the previous check
     * \return whether the next check is scheduled (false: the chain ended, check afresh)
     */
    bool GoOnChain(int64_t now, const Events& events);
    /**
     * \param changed the set changed since the previous check
     * \return the readings of the live queue pairs, the ports and the NICs now
     */
    Reading Read(bool changed) const;
    /** Add a snapshot to the congested check's history (or restart it). */
    void RecordHistory(int64_t now, const Reading& r, const Events& events);
    /**
     * Is the window since the previous check settled? Fills r.win.
     * \return -1 if settled, else the Stat index of the reason
     */
    int WindowVerdict(int64_t now, Reading& r, const Events& events) const;
    /** The queue pairs' part of WindowVerdict. \return -1 or the reason */
    int QueuePairVerdict(int64_t now, Reading& r) const;
    /** The ports' part of WindowVerdict. \return -1 or the reason */
    int PortVerdict(const Reading& r) const;
    /** Count the settled windows in a row and keep \p r as the previous snapshot. */
    void KeepWindow(int64_t now, int reason, Reading& r);
    /**
     * Try a skip now.
     * \param now current time, ns
     * \param chained reuse the rates of the previous skip (it stopped at another event)
     * \return the interval skipped, ns (0 = none)
     */
    int64_t TryJump(int64_t now, bool chained);
    /**
     * Set jump.reach, horizon and boundary from the next message end of each live queue pair.
     * \return false if a queue pair waits for its next message (no skip)
     */
    bool FindHorizon(Jump& jump) const;
    /** \return the time of the earliest pending event that is not the fabric's own, ns */
    uint64_t EarliestOtherEvent() const;
    /**
     * Bound the skip by the next other event (and the congested span); set jump.limit,
     * stoppedByOther and delta.
     * \return false if it is too short to take
     */
    bool BoundJump(int64_t now, bool chained, Jump& jump);
    /**
     * With AlignToPackets, shorten a skip stopped by another event to whole packet periods.
     * \return false if less than one period is left (no skip; m_alignRestNs is set)
     */
    bool AlignToPackets(Jump& jump);
    /**
     * Advance the live queue pairs by \p delta ns at their settled rates.
     * \param delta the skip, ns
     * \param moved receives the events to move later by the skip
     * \param skippedBytes receives the payload bytes skipped per live queue pair
     * \return the payload bytes skipped in all
     */
    uint64_t AdvanceQueuePairs(int64_t delta,
                               std::vector<const EventImpl*>* moved,
                               std::vector<uint64_t>* skippedBytes);
    /** Take \p bytes out of the message of \p qp that ends at \p end; later ones move up. */
    void ShortenStream(RdmaQueuePair* qp, uint64_t end, uint64_t bytes);
    /** Count the skip's ACKs, CNPs, wire bytes, frames, marks and pauses; collect moved events. */
    void AdvanceCounters(int64_t delta, std::vector<const EventImpl*>* moved);
    /** Apply the skip to each live queue pair's congestion control. */
    void AdvanceControllers(int64_t delta, const std::vector<uint64_t>& skippedBytes);
    /** Keep what the next (chained) check compares with: chain state, signatures. */
    void RememberSkip(const Jump& jump);
    /**
     * Settled rates from the last StableWindows windows (no congestion signals).
     * \param now current time, ns
     * \return false if a rate is not positive
     */
    bool SettledRates(int64_t now);
    /**
     * Do the two blocks of the snapshot history agree (a congested equilibrium)? If so, set
     * the rates and signal rates from them.
     * \return true if they agree
     */
    bool CongestedRates();
    /**
     * The queue pairs' part of CongestedRates: bytes and CNPs of the blocks h0..h1 and h1..h2
     * agree, and none without CNPs is recovering.
     * \param hold receives per queue pair whether it got CNPs (its controller is held)
     * \return true if they agree
     */
    bool QueuePairBlocksAgree(const Snapshot& h0,
                              const Snapshot& h1,
                              const Snapshot& h2,
                              std::vector<uint8_t>* hold) const;
    /** The ports' part of CongestedRates: marks, pauses and mean queues agree. */
    bool PortBlocksAgree(const Snapshot& h0, const Snapshot& h1, const Snapshot& h2) const;
    /**
     * Set the rates and signal rates of a congested equilibrium from h0..h2.
     * \param hold per queue pair: controller held (moved into m_hold)
     * \return false if a queue pair's rate is not positive
     */
    bool SetCongestedRates(const Snapshot& h0, const Snapshot& h2, std::vector<uint8_t>* hold);
    /** Equal settled rates for queue pairs that share an endpoint port alike (round robin). */
    void ShareRoundRobin();
    /** \return the delay of the next check after a skip of \p skipped ns */
    int64_t AfterSkip(int64_t skipped) const;
    /**
     * After a boundary: the settled rates of queue pairs that finished go to their connections'
     * new queue pairs (in the order of the live ones).
     * \return false if the live set is not the same connections
     */
    bool RemapRates();
    /** \return whether no congestion or loss signal arrived since the last skip */
    bool SignalsUnchanged() const;
    /** \return the end of the message \p qp is sending (its first end beyond sndNxt) */
    static uint64_t FirstEnd(const RdmaQueuePair* qp);
    /** Schedule the next check \p delayNs from now. */
    void ScheduleCheck(int64_t delayNs);

    // attributes
    Time m_interval;          //!< check interval
    uint32_t m_windows;       //!< settled windows before a skip
    double m_rateTol;         //!< relative tolerance of a queue pair's window bytes
    double m_rateMargin;      //!< congestion-control rate above throughput that does not pace
    uint64_t m_queueTol;      //!< absolute tolerance of a port's queue, bytes
    Time m_minJump;           //!< shortest skip worth taking
    bool m_alignToPackets;    //!< skips stopped by other events last whole packet periods
    int64_t m_alignRestNs{0}; //!< what an aligned skip left before the event that stopped it
    Time m_guard;             //!< kept packet by packet before a predicted message end
    Time m_msgGuard;          //!< the same before a message end followed by a queued message
    Time m_boundaryWait;      //!< longest wait in packets at a boundary before a chain ends
    uint32_t m_congWindows;   //!< windows per block of the congested check (0 = off)
    double m_congRateTol;     //!< relative tolerance of a queue pair's block bytes
    double m_signalTol;       //!< relative tolerance of a block's marks, pauses, CNPs
    uint64_t m_queueBand;     //!< tolerance of a port's mean queue between blocks, bytes
    double m_congJumpRatio;   //!< longest congested skip / its observation span
    int64_t m_congSpanNs{0};  //!< observation span of the congested rates
    int64_t m_congUsedNs{0};  //!< skipped with them so far (chained skips)

    std::deque<Snapshot> m_hist; //!< congested check: the last 2 CongestedWindows + 1 snapshots

    PacketNetwork* m_net{nullptr};
    bool m_supported{true};
    bool m_running{false}; //!< a check is scheduled
    bool m_changed{false}; //!< set changed since the last check
    bool m_fault{false};   //!< a fault since the last check
    EventId m_check;       //!< next check

    std::vector<uint32_t> m_live;       //!< unfinished queue pairs
    bool m_havePrev{false};             //!< m_prev* valid for m_live
    uint32_t m_stable{0};               //!< settled windows in a row
    int64_t m_prevNs{0};                //!< time of the previous snapshot
    int64_t m_refNs{0};                 //!< start of the settled run
    std::vector<uint64_t> m_prevUna;    //!< per live queue pair
    std::vector<uint64_t> m_prevWin;    //!< bytes acknowledged in the previous window
    std::vector<uint64_t> m_prevSig;    //!< per live queue pair: loss/CNP signature
    std::vector<uint64_t> m_prevLoss;   //!< per live queue pair: retransmits, timeouts, NACKs
    std::vector<uint64_t> m_portDrops;  //!< per port, previous snapshot: drops
    std::vector<uint64_t> m_refUna;     //!< at m_refNs
    std::vector<int64_t> m_prevProg;    //!< per live queue pair: time of its last ACK progress
    std::vector<int64_t> m_refProg;     //!< the same at m_refNs
    std::vector<uint64_t> m_prevSnd;    //!< per live queue pair: next byte to send
    std::vector<int64_t> m_prevSent;    //!< per live queue pair: start of its last send
    std::vector<uint64_t> m_refSnd;     //!< the same at m_refNs
    std::vector<int64_t> m_refSent;     //!< the same at m_refNs
    std::vector<uint64_t> m_portTx;     //!< per port, previous snapshot
    std::vector<uint64_t> m_portFrames; //!< per port, previous snapshot
    std::vector<uint64_t> m_portQueue;  //!< per port, previous snapshot
    std::vector<uint64_t> m_portSig;    //!< per port: marks + pauses + drops
    std::vector<uint64_t> m_refTx;      //!< per port at m_refNs
    std::vector<uint64_t> m_refFrames;  //!< per port at m_refNs
    std::vector<uint64_t> m_nicAcks;    //!< per node, previous snapshot
    std::vector<uint64_t> m_refAcks;    //!< per node at m_refNs

    bool m_chain{false};                 //!< the last skip stopped at another event or boundary
    bool m_atBoundary{false};            //!< the last skip stopped before a message boundary
    int64_t m_boundaryWaitNs{0};         //!< from the end of that skip to the boundary's delivery
    uint32_t m_chainRetries{0};          //!< chained checks put off by events due at once
    std::vector<uint64_t> m_skipSig;     //!< per rate slot: loss/CNP signature at the skip
    std::vector<uint32_t> m_rateConn;    //!< per rate slot: its connection (max: none)
    bool m_hardChange{false};            //!< a change other than a gap between messages
    std::vector<uint64_t> m_skipPortSig; //!< per port: marks + pauses + drops at the skip
    std::vector<uint32_t> m_rateSlots;   //!< queue pairs the settled rates belong to
    std::vector<double> m_rate;          //!< settled payload rate per queue pair, bytes/ns
    std::vector<double> m_carry;         //!< per queue-pair slot: bytes due but not skipped (+/-)
    std::vector<double> m_txRate;        //!< settled wire rate per port, bytes/ns
    std::vector<double> m_frameRate;     //!< settled frame rate per port, 1/ns
    std::vector<double> m_ackRate;       //!< settled ACK rate per node, 1/ns
    std::vector<double> m_markRate;      //!< congested: ECN marks per port, 1/ns
    std::vector<double> m_pauseRate;     //!< congested: PFC pause frames per port, 1/ns
    std::vector<double> m_cnpRate;       //!< congested: CNPs per queue pair, 1/ns
    std::vector<double> m_cnpOutRate;    //!< congested: CNPs sent per node, 1/ns
    std::vector<uint8_t> m_hold;         //!< per queue pair: controller held (it got CNPs)
    bool m_congestedRates{false};        //!< the rates are a congested equilibrium's
    uint64_t m_stats[N_STATS]{};         //!< see CopyStats

    TracedCallback<int64_t, int64_t, uint64_t> m_skipTrace; //!< start ns, interval ns, bytes
};

} // namespace ns3

#endif /* HETEROSIM_PACKET_FAST_FORWARD_H */
