/*
 * HeteroSim: the interface between the plan executor and a network model.
 */
#ifndef HETEROSIM_FLOW_NETWORK_H
#define HETEROSIM_FLOW_NETWORK_H

#include "ns3/callback.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/simulator.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief A network that moves point-to-point flows between GPUs on ns-3's clock.
 *
 * The executor calls StartFlow() when a flow's dependencies are met; the network calls the
 * completion callback (once per flow) when the flow's last byte has been delivered to the
 * destination GPU. Two implementations exist: the packet-level RDMA network and the fluid
 * (max-min fair) flow network. GPUs are numbered globally, as in the cluster file.
 */
class FlowNetwork : public Object
{
  public:
    /**
     * \brief Called when a flow finishes: (flow id, finish time).
     */
    typedef Callback<void, uint32_t, Time> FlowDoneCallback;

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    FlowNetwork();
    ~FlowNetwork() override;

    /**
     * \brief Start moving \p bytes from GPU \p srcGpu to GPU \p dstGpu now.
     * \param flowId caller's id, reported back on completion
     * \param srcGpu global index of the sending GPU
     * \param dstGpu global index of the receiving GPU
     * \param bytes payload size in bytes (> 0)
     * \param priority traffic class (PFC priority) of the flow
     */
    virtual void StartFlow(
        uint32_t flowId, uint32_t srcGpu, uint32_t dstGpu, uint64_t bytes, uint8_t priority) = 0;

    /**
     * \brief Post \p bytes from GPU \p srcGpu to GPU \p dstGpu as the next message on
     * connection \p connection (one NCCL connection: one queue pair per channel and peer).
     *
     * Messages of one connection are transferred one after another in the order they were
     * posted, as work requests on one RDMA queue pair are: the next message starts when the
     * previous one has left the sender, and each completes on its own. Connection ids are the
     * caller's; all messages of a connection must have the same source, destination and
     * priority. The default implementation ignores the connection (an independent flow); the
     * fluid and packet networks override it.
     * \param flowId caller's id, reported back on completion
     * \param srcGpu global index of the sending GPU
     * \param dstGpu global index of the receiving GPU
     * \param bytes payload size in bytes (> 0)
     * \param priority traffic class (PFC priority) of the flow
     * \param connection caller's connection id
     */
    virtual void StartFlowOnConnection(uint32_t flowId,
                                       uint32_t srcGpu,
                                       uint32_t dstGpu,
                                       uint64_t bytes,
                                       uint8_t priority,
                                       uint32_t connection);

    /**
     * \brief Take a link down or bring it back up (fault injection). Routes stay as they are
     * until Reroute(). The default does nothing.
     * \param link topology link
     * \param up whether it carries traffic
     */
    virtual void SetLinkUp(uint32_t link, bool up);

    /**
     * \brief Recompute routes over the links that are up now and move traffic to them (after
     * SetLinkUp(), once routing has converged). The default does nothing and returns 0.
     * \return number of active flows moved to another path
     */
    virtual uint32_t Reroute();

    /**
     * \brief Change a link's rate, both directions, from now on (fault injection). The
     * default does nothing.
     * \param link topology link
     * \param rateBps new rate, bit/s
     */
    virtual void SetLinkRate(uint32_t link, double rateBps);

    /**
     * \brief Make a link lossy (fault injection): a packet model drops frames with
     * \p probability; a fluid model, which has no frames, scales the capacity by
     * \p goodputFactor. The default does nothing.
     * \param link topology link
     * \param probability per-frame loss probability
     * \param goodputFactor share of the link rate left as goodput
     */
    virtual void SetLinkLoss(uint32_t link, double probability, double goodputFactor);

    /**
     * \brief Set the callback invoked when a flow completes.
     * \param cb the callback
     */
    void SetFlowDoneCallback(FlowDoneCallback cb);

    /**
     * \return the number of GPUs this network connects
     */
    virtual uint32_t GetNGpus() const = 0;

    /**
     * \brief Schedule flows to start at given simulated times (bulk, from arrays).
     *
     * Used for stand-alone network runs (netbench); the plan executor calls StartFlow() itself.
     * \param n number of flows
     * \param ids flow ids (small integers; finish times are kept in a vector indexed by id)
     * \param src sending GPU per flow
     * \param dst receiving GPU per flow
     * \param bytes payload bytes per flow
     * \param startNs start time per flow, ns
     * \param priority traffic class per flow
     */
    void ScheduleFlows(uint32_t n,
                       const uint32_t* ids,
                       const uint32_t* src,
                       const uint32_t* dst,
                       const uint64_t* bytes,
                       const int64_t* startNs,
                       const uint8_t* priority);

    /**
     * \brief Copy finish times of flows (ns; -1 for a flow not finished). Kept only for flows
     * finished while no executor listens (SetFlowDoneCallback): an executor records its flows'
     * ends itself, so the network does not hold a second time per task.
     * \param n number of ids
     * \param ids flow ids
     * \param out finish time per id, ns
     */
    void CopyFinishTimes(uint32_t n, const uint32_t* ids, int64_t* out) const;

    /** \return how many flows have finished so far */
    uint64_t GetFinishedCount() const;

    /**
     * \brief Set the fabric plane of flows (multi-plane fabrics): the plan's choice of NIC
     * port per flow, as NCCL maps its channels to NICs. Flows not given (or given -1) pick
     * their plane from their ECMP hash.
     * \param n number of flow ids
     * \param planes plane per flow id, -1 for none
     */
    void SetFlowPlanes(uint32_t n, const int8_t* planes);

    /**
     * \param flowId a flow id
     * \return the flow's plane, -1 when none was set
     */
    int32_t GetFlowPlane(uint32_t flowId) const;

  protected:
    /**
     * \brief Report a finished flow to the executor.
     * \param flowId the flow's id as given to StartFlow()
     */
    void NotifyFlowDone(uint32_t flowId);

    void DoDispose() override;

  private:
    FlowDoneCallback m_flowDone;     //!< set by the executor
    std::vector<int64_t> m_finishNs; //!< finish time per flow id (no executor), -1: none
    uint64_t m_finished{0};          //!< number of finished flows
    std::vector<int8_t> m_flowPlane; //!< plane per flow id, -1 = from the hash
};

} // namespace ns3

#endif /* HETEROSIM_FLOW_NETWORK_H */
