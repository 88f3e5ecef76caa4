/*
 * HeteroSim: DCQCN reaction point (Mellanox ConnectX variant).
 */
#ifndef HETEROSIM_DCQCN_H
#define HETEROSIM_DCQCN_H

#include "rdma-congestion-control.h"

#include "ns3/event-id.h"

namespace ns3
{

/**
 * \brief DCQCN reaction point as implemented by Mellanox ConnectX NICs (docs/network_models.md
 * §1.5; defaults are the firmware defaults of §1.6 [S4]; the NP's CNP interval
 * (RdmaNic::CnpInterval) defaults to the matching 4 us).
 *
 * The increase steps are the firmware's fixed RateAi = 5 Mb/s and RateHai = 50 Mb/s at every
 * speed. RateAi = 0 (RateHai = 0) derives the step from the QP's line rate (its NIC's port
 * rate, or the GPUDirect PCIe rate where that is lower) instead: RateAiFraction = 5 Mb/s and
 * RateHaiFraction = 50 Mb/s per 25 Gb/s, the HPCC simulator's run.py rule (RATE_AI = 5 bw/25,
 * RATE_HAI = 50 bw/25 Mb/s [S3]), so each NIC of a mixed-speed cluster gets the steps of its
 * own speed (20 / 200 Mb/s at 100G, 80 / 800 Mb/s at 400G). That rule belongs to S3's
 * timer-only reaction point (ByteCounter = 0 here): with timer-driven increases alone, Rt grows
 * by RateAi per IncreaseTimer, so only steps proportional to the line rate recover the same
 * fraction of it per second at every speed. The firmware's byte counter already fires in
 * proportion to the sending rate (every 32767 bytes: 0.66 us at 400 Gb/s), so its additive
 * increase (Rt += RateAi per ByteCounter bytes) already recovers the same fraction of the line
 * rate per second at every speed; scaling the steps as well makes that grow with the speed.
 *
 * - Alpha is updated periodically (AlphaUpdateInterval, periods counted from the first CNP):
 *   alpha <- (1-g) alpha + g if a CNP arrived in the period, else (1-g) alpha.
 * - Rate decrease is periodic: a CNP cuts at once if no cut happened in the last
 *   RateDecreaseInterval, otherwise at the end of that interval. A cut sets Rt <- Rc (always
 *   with ClampTargetRate; with ClampTargetRateAfterTimeInc only if an increase event happened
 *   since the previous cut), Rc <- max(MinRate, Rc (1 - alpha/2), MinDecreaseFactor Rc), and
 *   resets both increase stages, the byte counter and the increase timer.
 * - Increase events: the timer (every IncreaseTimer while below line rate) bumps the T stage,
 *   the byte counter (every ByteCounter payload bytes sent below line rate) bumps the BC stage.
 *   With F = FastRecoveryThreshold: fast recovery while both stages < F (Rc <- (Rt+Rc)/2);
 *   additive increase when one stage reached F (Rt += RateAi); hyper increase when both did
 *   (Rt += i RateHai, i = min(T, BC) - F + 1); then Rc <- (Rt+Rc)/2; both capped at line rate.
 *   ByteCounter 0 turns the byte counter off and stages the timer events as the HPCC simulator
 *   does (docs/network_models.md §1.5 [S3]): with s timer events since the cut before this one,
 *   fast recovery while s < F, additive increase at s = F, hyper increase by a constant RateHai
 *   for s > F.
 *
 * Alpha and the NP's CNP spacing must be consistent. Under sustained marking the NP sends one
 * CNP per CnpInterval N, so alpha settles where one rise balances the decays of the k - 1
 * empty periods, k = N / AlphaUpdateInterval:
 *   alpha* = g (1-g)^(k-1) / (1 - (1-g)^k)   (k = 1, i.e. N <= AlphaUpdateInterval: alpha* = 1).
 * With the Mellanox pair (N = 4 us, 1 us) alpha* ~ 0.25 and a QP cuts 12.5 % per 4 us; the
 * paper's pair (N = 50 us, K = 55 us) gives alpha* = 1, a halving per CNP. Mixing the paper's
 * N = 50 us with the Mellanox 1 us period gives alpha* ~ 0.018: cuts of ~1 % per 50 us that
 * cannot hold any queue below the PFC threshold.
 *
 * Alpha is evaluated lazily (the decay of k periods without CNP is applied as (1-g)^k when
 * next needed), so an idle QP costs no events. The same object can be driven without a
 * network: Start(), then ReceiveCnp()/OnSend() at chosen simulated times.
 */
class Dcqcn : public RdmaCongestionControl
{
  public:
    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    Dcqcn();

    void Start(double lineRateBps, Time baseRtt, uint32_t mtuBytes) override;
    void Stop() override;
    void ReceiveCnp() override;
    /** Moves the decrease-monitor and increase timers (alpha keeps ageing with the clock). */
    void ShiftClock(int64_t deltaNs, std::vector<const EventImpl*>* moved) override;
    /** Applies the increase-timer expirations the interval held, then the byte-counter stages
     * its bytes complete (timer stages first: their interleaving is not reproduced). */
    void AdvanceSkipped(int64_t deltaNs, uint64_t bytes) override;
    void HoldSkipped(int64_t deltaNs) override;
    void OnSend(uint32_t bytes) override;
    bool UsesCnp() const override;

    /** \return alpha, brought up to date to the current time */
    double GetAlpha();
    /** \return the target rate Rt, bit/s */
    double GetTargetRate() const;
    /** \return the timer stage counter */
    uint32_t GetTimerStage() const;
    /** \return the byte-counter stage counter */
    uint32_t GetByteStage() const;
    /** \return CNPs received */
    uint64_t GetCnpCount() const;
    /** \return the additive increase step in use since Start(), bit/s */
    double GetRateAi() const;
    /** \return the hyper increase step in use since Start(), bit/s */
    double GetRateHai() const;

  private:
    /** Apply the alpha updates of every period that ended by now. */
    void UpdateAlpha();
    /** Cut the rate. */
    void Decrease();
    /** End of a decrease-monitor period. */
    void DecreaseCheck();
    /** Increase timer expired. */
    void TimerExpired();
    /** One increase event (timer or byte counter). */
    void Increase();

    // attributes
    Time m_alphaInterval;    //!< alpha update period
    Time m_decreaseInterval; //!< rate decrease monitor period
    Time m_increaseTimer;    //!< increase timer period
    uint64_t m_byteCounter;  //!< byte counter quantum
    double m_g;              //!< alpha EWMA gain
    double m_initialAlpha;   //!< alpha at start
    uint32_t m_f;            //!< fast recovery threshold F
    DataRate m_rai;          //!< additive increase step (0 = from the line rate)
    DataRate m_rhai;         //!< hyper increase step (0 = from the line rate)
    double m_raiFraction;    //!< additive step per bit/s of line rate
    double m_rhaiFraction;   //!< hyper step per bit/s of line rate
    double m_minDecFactor;   //!< smallest allowed Rc_new / Rc_old
    bool m_clampTarget;      //!< Rt <- Rc on every cut
    bool m_clampAfterInc;    //!< Rt <- Rc on a cut after an increase event
    double m_rateOnFirstCnp; //!< Rc scale at the first CNP (0 = not used)

    // state
    double m_raiBps{0};              //!< additive increase step in use, bit/s
    double m_rhaiBps{0};             //!< hyper increase step in use, bit/s
    double m_rt{0};                  //!< target rate
    double m_alpha{1};               //!< congestion estimate
    bool m_started{false};           //!< first CNP seen (alpha periods run)
    int64_t m_alphaOriginNs{0};      //!< start of alpha period 0
    uint64_t m_alphaPeriod{0};       //!< first period whose update is pending
    bool m_cnpInPeriod{false};       //!< a CNP arrived in the pending period
    bool m_cnpPending{false};        //!< a CNP arrived since the last cut
    bool m_increasedSinceCut{false}; //!< an increase event happened since the last cut
    uint32_t m_timerStage{0};        //!< T stage
    uint32_t m_byteStage{0};         //!< BC stage
    uint64_t m_bytes{0};             //!< bytes towards the next byte-counter event
    uint64_t m_cnps{0};              //!< CNPs received
    EventId m_decreaseEvent;         //!< end of the current decrease-monitor period
    EventId m_timerEvent;            //!< increase timer
};

} // namespace ns3

#endif /* HETEROSIM_DCQCN_H */
