/*
 * HeteroSim: runs an execution plan (compute tasks, flows, markers with dependencies) on ns-3.
 */
#ifndef HETEROSIM_PLAN_EXECUTOR_H
#define HETEROSIM_PLAN_EXECUTOR_H

#include "compute-contention.h"
#include "compute-slowdown.h"
#include "flow-network.h"
#include "narrow-column.h"
#include "topology-description.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/ptr.h"
#include "ns3/traced-callback.h"

#include <chrono>
#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief Executes the DAG of heterosim/plan/execution_plan.py on ns-3's scheduler.
 *
 * Task kinds: COMPUTE (0) runs for its duration on compute stream (gpu, stream), one task at a
 * time per stream, ready tasks in task-index order; FLOW (1) is handed to the FlowNetwork when
 * ready and finishes when the network reports its last byte delivered; MARKER (2) finishes as
 * soon as it is ready. A task is ready when all its parents have finished; its delay (if any)
 * then passes before it is released (a COMPUTE task enters its stream's queue, a FLOW starts);
 * the delay does not hold the stream. Start times are the release (FLOW, MARKER) or the moment
 * the stream picks the task (COMPUTE).
 *
 * Before running, Validate() rejects a plan that cannot finish: unknown kinds, GPU indices out
 * of range, flows to the same GPU or with no route in the topology, dependency indices out of
 * range, and dependency cycles (Kahn's algorithm; the message names the tasks of one cycle).
 * While running, a stall (no event left but tasks unfinished) ends the run with a message that
 * names unfinished tasks; it never hangs. A network with periodic events of its own (timers,
 * samplers) never runs out of events, so StallTimeout also reports a stall when no task finished
 * for that long (simulated). StopTime ends the run early (partial results).
 *
 * Progress: the number of finished tasks is sampled every ProgressInterval of simulated time
 * (recorded lazily at task completions, no extra events), and Resume() returns to the caller
 * about every WallInterval of wall-clock time so that the caller can show progress.
 */
class PlanExecutor : public Object
{
  public:
    /** Task kinds (same numbers as heterosim.plan.execution_plan). */
    enum TaskKind : uint8_t
    {
        COMPUTE = 0,
        FLOW = 1,
        MARKER = 2
    };

    /** What Resume() reports. */
    enum RunState : int32_t
    {
        NOT_STARTED = 0,
        FINISHED = 1, //!< every task finished
        YIELDED = 2,  //!< returned for progress reporting; call Resume() again
        STOPPED = 3,  //!< StopTime reached first (partial results)
        STALLED = 4,  //!< no event left but tasks unfinished (see GetError())
        INVALID = 5   //!< the plan failed Validate() (see GetError())
    };

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    /** Trace signature of TaskStart / TaskDone: task index. */
    typedef void (*TaskCallback)(uint32_t);

    PlanExecutor();
    ~PlanExecutor() override;

    /**
     * \brief Set the network that moves FLOW tasks (its GPU count bounds GPU indices).
     * \param network the network
     */
    void SetNetwork(Ptr<FlowNetwork> network);

    /**
     * \brief Set the topology used to check, before running, that every flow has a route.
     * \param topo the topology (optional)
     */
    void SetTopology(Ptr<TopologyDescription> topo);

    /**
     * \brief Slow compute tasks down on straggler GPUs (optional; null = nominal durations).
     * A task's duration is ComputeSlowdown::Stretch(gpu, start, duration) when its stream
     * picks it.
     * \param slowdown the windows
     */
    void SetComputeSlowdown(Ptr<ComputeSlowdown> slowdown);

    /**
     * \brief Slow compute tasks down while communication kernels run on their GPU (optional;
     * null = no contention). A running compute task progresses at 1 / ComputeContention::Factor
     * of its nominal speed; when a flow starts or ends on its GPU the factor is re-read and the
     * task's end re-timed from the work it has left.
     * \param contention the contention model (its per-task terms set for this plan)
     */
    void SetComputeContention(Ptr<ComputeContention> contention);

    /**
     * \brief Load the plan from arrays (copied).
     * \param n number of tasks
     * \param kind task kind
     * \param gpu GPU of a compute task / source of a flow
     * \param dst destination GPU of a flow
     * \param bytes flow size
     * \param durationNs compute duration, ns
     * \param delayNs fixed latency before the task is released, ns
     * \param stream compute stream
     * \param priority flow traffic class
     * \param depPtr CSR offsets of the parent lists (n + 1 values)
     * \param depIdx parent task indices
     */
    void LoadPlan(uint32_t n,
                  const uint8_t* kind,
                  const int32_t* gpu,
                  const int32_t* dst,
                  const int64_t* bytes,
                  const int64_t* durationNs,
                  const int64_t* delayNs,
                  const int16_t* stream,
                  const uint8_t* priority,
                  const int64_t* depPtr,
                  const int64_t* depIdx);

    /**
     * \brief As LoadPlan, but the executor keeps the caller's arrays instead of copying them
     * (a plan of millions of tasks is not held twice). They must stay alive and unchanged until
     * ReleaseTasks(), another LoadPlan / BorrowPlan, or the executor's end.
     * \param n number of tasks
     * \param kind task kind
     * \param gpu GPU of a compute task / source of a flow
     * \param dst destination GPU of a flow
     * \param bytes flow size
     * \param durationNs compute duration, ns
     * \param delayNs fixed latency before the task is released, ns
     * \param stream compute stream
     * \param priority flow traffic class
     * \param depPtr CSR offsets of the parent lists (n + 1 values)
     * \param depIdx parent task indices
     */
    void BorrowPlan(uint32_t n,
                    const uint8_t* kind,
                    const int32_t* gpu,
                    const int32_t* dst,
                    const int64_t* bytes,
                    const int64_t* durationNs,
                    const int64_t* delayNs,
                    const int16_t* stream,
                    const uint8_t* priority,
                    const int64_t* depPtr,
                    const int64_t* depIdx);

    /**
     * \brief As BorrowPlan, with flow sizes, durations and delays in 32 bits (a plan whose
     * values all fit: 12 bytes per task less); the executor reads them as 64-bit values.
     * \param n number of tasks
     * \param kind task kind
     * \param gpu GPU of a compute task / source of a flow
     * \param dst destination GPU of a flow
     * \param bytes flow size
     * \param durationNs compute duration, ns
     * \param delayNs fixed latency before the task is released, ns
     * \param stream compute stream
     * \param priority flow traffic class
     * \param depPtr CSR offsets of the parent lists (n + 1 values)
     * \param depIdx parent task indices
     */
    void BorrowPlanNarrow(uint32_t n,
                          const uint8_t* kind,
                          const int32_t* gpu,
                          const int32_t* dst,
                          const int32_t* bytes,
                          const int32_t* durationNs,
                          const int32_t* delayNs,
                          const int16_t* stream,
                          const uint8_t* priority,
                          const int64_t* depPtr,
                          const int64_t* depIdx);

    /**
     * \brief Give the loaded plan the parents CSR in 32 bits, kept, not copied (lifetime as for
     * BorrowPlan, or until ReleaseParents()): a plan whose offsets and indices all fit holds
     * 4 bytes per task and per dependency less; the executor reads them as 64-bit values.
     * BorrowPlan / BorrowPlanNarrow may then be given null dependency arrays.
     * \param n number of tasks (as given to BorrowPlan)
     * \param depPtr CSR offsets of the parent lists (n + 1 values)
     * \param depIdx parent task indices
     */
    void BorrowParentsNarrow(uint32_t n, const int32_t* depPtr, const int32_t* depIdx);

    /**
     * \brief Give the loaded plan its GPU columns in 16 bits, kept, not copied (lifetime as for
     * BorrowPlan): a cluster of up to 32,767 GPUs holds 4 bytes per task less. BorrowPlan /
     * BorrowPlanNarrow may then be given null gpu and dst arrays.
     * \param n number of tasks (as given to BorrowPlan)
     * \param gpu GPU of a compute task / source of a flow
     * \param dst destination GPU of a flow
     */
    void BorrowEndpointsNarrow(uint32_t n, const int16_t* gpu, const int16_t* dst);

    /**
     * \brief As SetConnections, but the caller's array is kept, not copied (lifetime as for
     * BorrowPlan).
     * \param n number of tasks (as given to LoadPlan / BorrowPlan)
     * \param connection connection id per task, -1 for none
     */
    void BorrowConnections(uint32_t n, const int64_t* connection);

    /**
     * \brief As BorrowConnections, with the ids in 32 bits.
     * \param n number of tasks (as given to LoadPlan / BorrowPlan)
     * \param connection connection id per task, -1 for none
     */
    void BorrowConnectionsNarrow(uint32_t n, const int32_t* connection);

    /**
     * \brief Give flows their connections (after LoadPlan; LoadPlan resets every flow to none).
     *
     * Flows with the same connection id are messages on one NCCL connection: the executor
     * releases each when its dependencies are met, as any flow, and hands it to the network
     * with FlowNetwork::StartFlowOnConnection, which transfers a connection's messages one
     * after another. A negative id means an independent flow.
     * \param n number of tasks (as given to LoadPlan)
     * \param connection connection id per task, -1 for none
     */
    void SetConnections(uint32_t n, const int64_t* connection);

    /**
     * \brief Check that the loaded plan can finish (see class doc).
     * \return true if valid; otherwise GetError() says why
     */
    bool Validate();

    /**
     * \brief Validate (unless Validate() passed since the plan, connections, network or
     * topology last changed), then schedule the root tasks and the StopTime event at simulated
     * time 0.
     * \return false if the plan is invalid
     */
    bool Start();

    /**
     * \brief Let go of the parents CSR (depPtr, depIdx of LoadPlan / BorrowPlan) after a
     * successful Validate(): the run only reads the children CSR Validate() built, so a caller
     * that borrowed the plan may free those two arrays before Start() (a plan of millions of
     * tasks then does not hold both CSRs and the task times at once).
     * \return false (and nothing released) if the plan has not been validated
     */
    bool ReleaseParents();

    /**
     * \brief Run the simulator until the plan finishes, stalls, stops, or it is time to report
     * progress.
     * \return a RunState
     */
    int32_t Resume();

    /**
     * \brief Start() and Resume() until the run ends.
     * \return the final RunState
     */
    int32_t Run();

    /** \return the error of an invalid or stalled plan, empty otherwise */
    std::string GetError() const;
    /** \return number of tasks */
    uint32_t GetNTasks() const;
    /** \return number of finished tasks */
    uint64_t GetTasksDone() const;
    /** \return number of flows handed to the network and not yet finished */
    uint64_t GetFlowsInFlight() const;
    /** \return the latest task end time, ns (0 if none finished) */
    int64_t GetMakespanNs() const;

    /**
     * \brief Copy start and end times of every task (ns; -1 if it did not start / finish).
     * \param start output, n values
     * \param end output, n values
     */
    void CopyTimes(int64_t* start, int64_t* end) const;

    /**
     * \brief Record the start and end times of the next run (Start()) in the caller's arrays
     * instead of the executor's own (nothing to copy out afterwards). They must stay alive until
     * ReleaseTasks(), another LoadPlan / BorrowPlan, or the executor's end; Start() sets every
     * value to -1, and each task's times as it starts and finishes.
     * \param n number of tasks (that of the loaded plan)
     * \param start output, n values
     * \param end output, n values
     */
    void BorrowTimes(uint32_t n, int64_t* start, int64_t* end);

    /**
     * \brief As BorrowTimes, in 32 bits (4 bytes per task and time less while the run goes).
     * A time that does not fit (2^31 ns, 2.1 s, or later) is kept apart, and the executor
     * returns from Resume() (YIELDED) with NarrowTimesFull() true: the caller then hands it
     * 64-bit arrays (WidenTimes), or the next Resume() moves the times into the executor's own.
     * \param n number of tasks (that of the loaded plan)
     * \param start output, n values
     * \param end output, n values
     */
    void BorrowTimesNarrow(uint32_t n, int32_t* start, int32_t* end);

    /** \return whether a time of the run did not fit the 32-bit arrays of BorrowTimesNarrow */
    bool NarrowTimesFull() const;

    /**
     * \brief Copy every time so far (-1 where a task did not start / finish) into the caller's
     * 64-bit arrays and record the rest of the run there (as BorrowTimes; the 32-bit arrays are
     * not read or written again). Each may be the memory of the 32-bit array it widens, 8
     * bytes per task from its start (widened in place: no second copy of the times).
     * \param n number of tasks (that of the loaded plan)
     * \param start output, n values
     * \param end output, n values
     */
    void WidenTimes(uint32_t n, int64_t* start, int64_t* end);

    /** \return number of progress samples */
    uint32_t GetNSamples() const;

    /**
     * \brief Copy progress samples: at time k * ProgressInterval, tasks finished and flows in
     * flight.
     * \param timeNs output
     * \param tasksDone output
     * \param flowsInFlight output
     */
    void CopySamples(int64_t* timeNs, uint64_t* tasksDone, uint64_t* flowsInFlight) const;

    /**
     * \brief Free the plan and every per-task array of the run, once the times are copied out
     * (CopyTimes): the memory goes back for the network readout and the reports. The executor
     * is then empty (GetNTasks() 0, CopyTimes copies nothing); the makespan, tasks done,
     * samples and error stay. A run abandoned between two Resume() calls is STOPPED: Resume()
     * does nothing more (its pending events must not run: destroy the simulator).
     */
    void ReleaseTasks();

  protected:
    void DoDispose() override;

  private:
    /** A task's dependencies are met. */
    void Ready(uint32_t task);
    /** A task's delay has passed (or it had none): hand it to its stream / the network. */
    void Release(uint32_t task);
    /** Event: a delayed task is released. */
    void DelayedRelease(uint32_t task);
    /** Start the next ready task of an idle stream. */
    void TryStartStream(uint32_t stream);
    /** Event: a compute task ends. */
    void ComputeDone(uint32_t stream, uint32_t task);
    /** Network callback: a flow's last byte arrived. */
    void OnFlowDone(uint32_t flowId, Time when);
    /** Event: release every task without parents. */
    void StartRoots();
    /** Event: StopTime reached. */
    void StopTimeReached();
    /** Event: periodic check that some task finished since the last check. */
    void Watchdog();
    /** Finish queued completed tasks and everything they make ready; kick idle streams. */
    void Drain();
    /** Record progress samples up to (but excluding) \p nowNs. */
    void SampleUntil(int64_t nowNs, bool inclusive);
    // Validate(), one job each; a check returns "" or the one-line error
    /** Every task's fields, flow routes and connections (the first error). */
    std::string CheckTasks() const;
    /** Task \p i's own fields: kind, delay, GPU indices, duration, stream, bytes. */
    std::string CheckTaskFields(uint32_t i, int64_t nGpus) const;
    /** The dependency CSR: offsets consistent and non-decreasing, parents exist. */
    std::string CheckDependencyArrays() const;
    /** Build the children CSR (m_childPtr, m_childIdx) from the parents CSR. */
    void BuildChildren();
    /** Kahn's algorithm over the children CSR: every task can start, else the cycle. */
    std::string CheckAcyclic();
    /**
     * The message naming one dependency cycle.
     * \param left unfinished parents per task after Kahn's algorithm
     * \param blocked number of tasks that can never start
     */
    std::string DescribeCycle(const std::vector<uint32_t>& left, std::size_t blocked) const;
    /** Give every (GPU, stream) of a compute task a dense index (m_denseStream, m_nStreams). */
    void NumberComputeStreams();
    /** Point the plan's columns at \p kind ... \p depIdx (owned copies or the caller's). */
    void UsePlan(uint32_t n,
                 const uint8_t* kind,
                 const int32_t* gpu,
                 const int32_t* dst,
                 const int64_t* bytes,
                 const int64_t* durationNs,
                 const int64_t* delayNs,
                 const int16_t* stream,
                 const uint8_t* priority,
                 const int64_t* depPtr,
                 const int64_t* depIdx);
    /** \param task a task \return its connection id, -1 for none */
    int64_t ConnectionOf(uint32_t task) const;
    /** Re-time the compute tasks running on the GPUs in \p gpus after their factor changed. */
    void Retime(const std::vector<int32_t>& gpus);
    /** Schedule the end of the task running on stream \p s from its work left and factor. */
    void ScheduleComputeEnd(uint32_t s);
    /** Build the stall message. */
    std::string DescribeStall() const;
    /** Append a one-line description of task \p t to \p out. */
    void DescribeTask(uint32_t t, std::ostream& out) const;

    Ptr<FlowNetwork> m_network;          //!< moves the flows
    Ptr<TopologyDescription> m_topo;     //!< route checks
    Ptr<ComputeSlowdown> m_slowdown;     //!< straggler windows (may be null)
    Ptr<ComputeContention> m_contention; //!< compute/communication contention (may be null)
    Time m_stopTime;                     //!< 0 = no limit
    Time m_progressInterval;             //!< 0 = no samples
    Time m_wallInterval;                 //!< 0 = never yield
    Time m_stallTimeout;                 //!< 0 = only an empty event queue is a stall

    /** A per-task integer column: 64-bit values, or 32-bit ones (BorrowPlanNarrow). */
    using IntColumn = NarrowColumn<int64_t, int32_t>;

    /** A per-task GPU column: 32-bit ids, or 16-bit ones (BorrowEndpointsNarrow). */
    using GpuColumn = NarrowColumn<int32_t, int16_t>;

    /** Start or end times of every task: 64-bit, or 32-bit (BorrowTimesNarrow) with the
     * values that do not fit held apart (\c beyond) until WidenTimes(). */
    struct TimeColumn
    {
        static constexpr int32_t kBeyond = std::numeric_limits<int32_t>::min(); //!< in \c beyond

        std::span<int64_t> wide;                      //!< the times in 64 bits, or empty
        std::span<int32_t> narrow;                    //!< the times in 32 bits, or empty
        std::unordered_map<uint32_t, int64_t> beyond; //!< narrow: times above 2^31 - 1, by task

        /** \return the time of task \p i */
        int64_t
        Get(uint32_t i) const
        {
            if (narrow.empty())
            {
                return wide[i];
            }
            return narrow[i] == kBeyond ? beyond.at(i) : narrow[i];
        }

        /** Set the time of task \p i to \p ns. \return false if it did not fit 32 bits */
        bool
        Set(uint32_t i, int64_t ns)
        {
            if (narrow.empty())
            {
                wide[i] = ns;
                return true;
            }
            if (ns <= std::numeric_limits<int32_t>::max())
            {
                narrow[i] = static_cast<int32_t>(ns);
                return true;
            }
            narrow[i] = kBeyond;
            beyond[i] = ns;
            return false;
        }

        /** \return the number of tasks */
        std::size_t
        size() const
        {
            return narrow.empty() ? wide.size() : narrow.size();
        }
    };

    /** Record \p ns as task \p t's time in \p column; one that does not fit 32 bits
     * returns from the run (NarrowTimesFull()). */
    void SetTime(TimeColumn& column, uint32_t t, int64_t ns);
    /** Copy every time into \p start and \p end (m_n values each; each may overlay the
     * 32-bit array it widens) and record there from now on. */
    void MoveTimes(int64_t* start, int64_t* end);

    /** The plan's columns when LoadPlan / SetConnections copied them (empty when borrowed). */
    struct OwnedPlan
    {
        std::vector<uint8_t> kind;       //!< kind per task
        std::vector<int32_t> gpu;        //!< gpu per task
        std::vector<int32_t> dst;        //!< flow destination
        std::vector<int64_t> bytes;      //!< flow bytes
        std::vector<int64_t> duration;   //!< compute ns
        std::vector<int64_t> delay;      //!< release delay ns
        std::vector<int16_t> stream;     //!< compute stream
        std::vector<uint8_t> priority;   //!< flow class
        std::vector<int64_t> depPtr;     //!< parents CSR
        std::vector<int64_t> depIdx;     //!< parents
        std::vector<int64_t> connection; //!< flow connection id
    };

    // the plan: views of the owned copies or of the caller's arrays (BorrowPlan)
    uint32_t m_n{0};                     //!< tasks
    OwnedPlan m_owned;                   //!< copies, when not borrowed
    std::span<const uint8_t> m_kind;     //!< kind per task
    GpuColumn m_gpu;                     //!< gpu per task
    GpuColumn m_dst;                     //!< flow destination
    IntColumn m_bytes;                   //!< flow bytes
    IntColumn m_duration;                //!< compute ns
    IntColumn m_delay;                   //!< release delay ns
    std::span<const int16_t> m_stream;   //!< compute stream
    std::span<const uint8_t> m_priority; //!< flow class
    IntColumn m_connection;              //!< flow connection id, -1 for none; both empty: none
    IntColumn m_depPtr;                  //!< parents CSR
    IntColumn m_depIdx;                  //!< parents
    std::vector<uint32_t> m_childPtr;    //!< children CSR (<= 2^32 - 1 dependencies)
    std::vector<uint32_t> m_childIdx;    //!< children
    std::vector<std::vector<uint32_t>> m_denseStream; //!< dense index per GPU and stream number
    uint32_t m_nStreams{0};                           //!< dense streams
    bool m_validated{false};                          //!< Validate() passed

    // run state
    std::vector<uint32_t> m_waiting;    //!< unfinished parents per task
    std::vector<uint8_t> m_state;       //!< 0 waiting, 1 delayed, 2 queued, 3 running, 4 done
    TimeColumn m_start;                 //!< ns: m_ownTimes or the caller's (BorrowTimes...)
    TimeColumn m_end;                   //!< ns: m_ownTimes or the caller's (BorrowTimes...)
    std::vector<int64_t> m_ownTimes;    //!< start then end per task, without BorrowTimes
    std::span<int64_t> m_borrowStart;   //!< BorrowTimes' start array, empty: none
    std::span<int64_t> m_borrowEnd;     //!< BorrowTimes' end array
    std::span<int32_t> m_borrowStart32; //!< BorrowTimesNarrow's start array, empty: none
    std::span<int32_t> m_borrowEnd32;   //!< BorrowTimesNarrow's end array
    bool m_timesFull{false};            //!< a time did not fit the 32-bit arrays
    std::vector<std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>>>
        m_queues;                                    //!< ready compute tasks per stream
    std::vector<uint8_t> m_streamBusy;               //!< per stream
    std::vector<std::vector<uint32_t>> m_gpuStreams; //!< dense streams per GPU

    /** The compute task a stream runs now, as contention re-times it. */
    struct Running
    {
        uint32_t task{0};     //!< task index
        EventId end;          //!< its ComputeDone
        int64_t nominalNs{0}; //!< its duration without contention
        double leftNs{0};     //!< nominal work left at \c sinceNs
        int64_t sinceNs{0};   //!< last re-timing
        double factor{1.0};   //!< slowdown since then
    };

    std::vector<Running> m_running;     //!< per stream
    std::vector<int32_t> m_changedGpus; //!< scratch for contention updates
    std::vector<uint32_t> m_completed;  //!< tasks to finish in Drain()
    std::vector<uint32_t> m_kick;       //!< streams to kick in Drain()
    bool m_draining{false};             //!< inside Drain()
    uint64_t m_done{0};                 //!< finished tasks
    uint64_t m_flowsInFlight{0};        //!< flows in the network
    int64_t m_makespan{0};              //!< latest end
    int32_t m_runState{NOT_STARTED};    //!< last state
    bool m_yield{false};                //!< Stop() called for progress
    bool m_stopHit{false};              //!< StopTime reached
    bool m_watchdogStall{false};        //!< no task finished within StallTimeout
    uint64_t m_watchdogDone{0};         //!< tasks finished at the last watchdog check
    std::string m_error;                //!< why the plan is invalid / stalled
    uint32_t m_sinceWallCheck{0};       //!< completions since the last wall-clock check
    std::chrono::steady_clock::time_point m_lastYield; //!< wall clock of the last return

    std::vector<int64_t> m_sampleTime;   //!< ns
    std::vector<uint64_t> m_sampleDone;  //!< tasks finished
    std::vector<uint64_t> m_sampleFlows; //!< flows in flight
    int64_t m_nextSample{0};             //!< ns

    TracedCallback<uint32_t> m_taskStartTrace; //!< task started
    TracedCallback<uint32_t> m_taskDoneTrace;  //!< task finished
};

} // namespace ns3

#endif /* HETEROSIM_PLAN_EXECUTOR_H */
