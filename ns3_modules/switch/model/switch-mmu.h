/*
 * HeteroSim: shared-buffer memory management unit of a switch (ingress accounting, PFC).
 */
#ifndef HETEROSIM_SWITCH_MMU_H
#define HETEROSIM_SWITCH_MMU_H

#include "ns3/object.h"

#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Broadcom-style shared buffer with per-(ingress port, priority) accounting
 * (docs/network_models.md §2.6, §3.2-3.3).
 *
 * Every (port, priority) has a small guaranteed reserve; bytes beyond it come from the shared
 * pool as long as the (port, priority) shared use stays within the PFC threshold T(p); with
 * PFC on, bytes beyond that go to the port's headroom, and a packet is dropped only when the
 * headroom is exhausted too (a mis-sized headroom, counted). T(p) is either static
 * (PfcStaticXoff) or dynamic: alpha(p) * (free shared buffer), with alpha(p) = PfcAlpha scaled
 * by the port's speed relative to the slowest port of the switch (the HPCC simulator's rule;
 * PfcAlphaSpeedScaling false gives every port PfcAlpha).
 *
 * Sharing under sustained PFC: the egress queue of a priority is one FIFO, so each ingress
 * port's share of a congested egress equals its share of the FIFO's bytes, and every paused
 * ingress port holds about its threshold T(p). Equal thresholds therefore split the egress
 * per ingress port, not per flow (the DCQCN paper's unfairness: one local sender ~1/2, three
 * senders behind one upstream port ~1/6 each); speed-scaled alpha splits it in proportion to
 * alpha(p) (a 400G port's flows get 4x the share of a 100G port's).
 * XOFF when headroom is in use or shared use reaches T(p); XON when headroom is empty and the
 * shared use is zero or at least PfcResumeOffset below T(p).
 *
 * With PFC off the buffer is lossy: a packet that fits neither its reserve nor the free shared
 * pool is dropped. Headroom is reserved per port (BufferSize minus all reserves and headrooms
 * forms the shared pool); one lossless priority per port is assumed to use it at a time.
 */
class SwitchMmu : public Object
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    SwitchMmu();

    /**
     * \brief Size the buffer for the switch's ports.
     * \param rateBps line rate per port, bit/s
     * \param headroomBytes PFC headroom per port, bytes (ignored with PFC off)
     * \param pfcEnabled whether the buffer is lossless
     * \param bufferBytes total buffer of the switch, bytes
     */
    void Configure(const std::vector<uint64_t>& rateBps,
                   const std::vector<uint64_t>& headroomBytes,
                   bool pfcEnabled,
                   uint64_t bufferBytes);

    /**
     * \brief Admit a packet arriving on (port, priority).
     * \param port ingress port
     * \param priority priority
     * \param bytes packet bytes
     * \return false if it must be dropped
     */
    bool Admit(uint32_t port, uint8_t priority, uint32_t bytes);

    /**
     * \brief Release a packet that came in on (port, priority) (at dequeue).
     * \param port ingress port
     * \param priority priority
     * \param bytes packet bytes
     */
    void Release(uint32_t port, uint8_t priority, uint32_t bytes);

    /** \param port ingress port \param priority priority \return whether XOFF should be sent */
    bool ShouldPause(uint32_t port, uint8_t priority) const;
    /** \param port ingress port \param priority priority \return whether XON should be sent */
    bool ShouldResume(uint32_t port, uint8_t priority) const;
    /** \brief Record the pause state. \param port port \param priority prio \param paused state */
    void SetPaused(uint32_t port, uint8_t priority, bool paused);
    /** \param port port \param priority prio \return recorded pause state */
    bool IsPaused(uint32_t port, uint8_t priority) const;

    /** \param port ingress port \return current PFC threshold T(p), bytes */
    uint64_t GetThreshold(uint32_t port) const;
    /** \return bytes of the shared pool in use */
    uint64_t GetSharedUsed() const;
    /** \return size of the shared pool, bytes */
    uint64_t GetSharedPool() const;
    /** \return bytes buffered in total (reserve + shared + headroom) */
    uint64_t GetTotalUsed() const;
    /** \return packets dropped with PFC on (headroom overflow) */
    uint64_t GetLosslessDrops() const;
    /** \return PFC pause time in quanta carried by XOFF frames */
    uint16_t GetPauseQuanta() const;
    /** \return whether PFC is on */
    bool IsPfcEnabled() const;

  private:
    /** Per (port, priority) counters. */
    struct Ingress
    {
        uint64_t reserve{0};  //!< bytes in the guaranteed reserve
        uint64_t shared{0};   //!< bytes in the shared pool
        uint64_t headroom{0}; //!< bytes in the headroom
        bool paused{false};   //!< XOFF sent and not yet lifted
    };

    /** \return counters of (port, priority) */
    Ingress& At(uint32_t port, uint8_t priority);
    /** \return counters of (port, priority) */
    const Ingress& At(uint32_t port, uint8_t priority) const;
    /** Admission of a lossy priority on a lossless switch (LossyPriorities). */
    bool AdmitLossy(Ingress& in, uint32_t port, uint32_t bytes);

    uint64_t m_reserve;       //!< guaranteed bytes per (port, priority)
    bool m_dynamic;           //!< dynamic threshold on
    double m_alpha;           //!< dynamic threshold factor at the slowest port speed
    bool m_alphaSpeedScaling; //!< scale alpha with the port speed
    uint64_t m_staticXoff;    //!< static threshold, bytes
    uint64_t m_resumeOffset;  //!< XON hysteresis, bytes
    uint16_t m_pauseQuanta;   //!< quanta carried by XOFF frames

    uint8_t m_lossyMask{0};           //!< priorities kept lossy under PFC
    bool m_pfc{true};                 //!< lossless
    uint64_t m_buffer{0};             //!< total bytes
    uint64_t m_sharedPool{0};         //!< shared pool bytes
    uint64_t m_sharedUsed{0};         //!< shared pool bytes in use
    uint64_t m_totalUsed{0};          //!< all bytes buffered
    std::vector<double> m_portAlpha;  //!< alpha per port
    std::vector<uint64_t> m_headroom; //!< headroom per port
    std::vector<Ingress> m_ingress;   //!< per (port, priority)
    uint64_t m_losslessDrops{0};      //!< headroom overflows
};

} // namespace ns3

#endif /* HETEROSIM_SWITCH_MMU_H */
