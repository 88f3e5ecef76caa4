/*
 * HeteroSim: RED-style ECN marking decision of a switch egress queue (DCQCN congestion point).
 */
#ifndef HETEROSIM_RED_ECN_MARKER_H
#define HETEROSIM_RED_ECN_MARKER_H

#include "ns3/data-rate.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

/**
 * \brief Marks with probability 0 below Kmin, Pmax*(q-Kmin)/(Kmax-Kmin) between Kmin and
 * Kmax, and 1 above Kmax, on the instantaneous egress queue q (docs/network_models.md §1.1).
 *
 * Thresholds are given for a reference port speed and, by default, scale linearly with the
 * port's line rate (as the HPCC simulator's run.py does: Kmin = 100 KB and Kmax = 400 KB per
 * 25 Gb/s, Pmax = 0.2; KB = 1000 bytes). Random draws come from the marker's own xorshift
 * stream (seeded by the Seed attribute and SetStream()), so marking never depends on the run
 * seed that drives ECMP.
 */
class RedEcnMarker : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    RedEcnMarker();

    /**
     * \brief Marking probability.
     * \param queueBytes instantaneous egress queue, bytes
     * \param rateBps port line rate, bit/s
     * \return probability in [0, 1]
     */
    double GetProbability(uint64_t queueBytes, uint64_t rateBps) const;

    /**
     * \brief Draw a marking decision.
     * \param queueBytes instantaneous egress queue, bytes
     * \param rateBps port line rate, bit/s
     * \return whether to mark
     */
    bool ShouldMark(uint64_t queueBytes, uint64_t rateBps);

    /**
     * \brief Select an independent random stream (e.g. the switch's node id).
     * \param stream stream number
     */
    void SetStream(uint64_t stream);

    /** \return whether marking happens at enqueue (else at dequeue) */
    bool MarksAtEnqueue() const;

  private:
    /** \return a uniform draw in [0, 1) */
    double Uniform();

    uint64_t m_kmin;          //!< Kmin at the reference rate, bytes
    uint64_t m_kmax;          //!< Kmax at the reference rate, bytes
    double m_pmax;            //!< marking probability at Kmax
    DataRate m_referenceRate; //!< speed the thresholds are given for
    bool m_scale;             //!< scale thresholds with the port rate
    bool m_atEnqueue;         //!< mark at enqueue instead of dequeue
    uint64_t m_seed;          //!< base seed of the random stream
    uint64_t m_state{0};      //!< xorshift state
};

} // namespace ns3

#endif /* HETEROSIM_RED_ECN_MARKER_H */
